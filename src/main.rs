//! sqlgrade command line (thin: everything lives in the library).

fn main() -> anyhow::Result<()> {
    Ok(())
}
