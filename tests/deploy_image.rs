//! The container image (`deploy/compose/Dockerfile`) builds with a Cargo profile the workspace
//! declares and copies the binary that profile writes: a renamed or removed profile, or a
//! `COPY` left pointing at another profile's directory, would otherwise surface only when
//! somebody builds the image (no test builds it; it needs Docker).

use std::path::Path;

fn repo_file(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

/// The `--profile NAME` (or `--release`) of the image's `cargo build` line.
fn built_profile(dockerfile: &str) -> String {
    let build = dockerfile
        .lines()
        .find(|l| l.trim_start().starts_with("RUN cargo build"))
        .expect("the Dockerfile builds with `RUN cargo build`");
    let words: Vec<&str> = build.split_whitespace().collect();
    if let Some(i) = words.iter().position(|w| *w == "--profile") {
        return words
            .get(i + 1)
            .expect("--profile names a profile")
            .to_string();
    }
    assert!(words.contains(&"--release"), "no profile in {build:?}");
    "release".to_string()
}

#[test]
fn the_image_builds_a_declared_profile_and_copies_its_binary() {
    let dockerfile = repo_file("deploy/compose/Dockerfile");
    let profile = built_profile(&dockerfile);
    let manifest: toml::Table = repo_file("Cargo.toml").parse().expect("Cargo.toml parses");
    if profile != "release" {
        let declared = manifest
            .get("profile")
            .and_then(|p| p.get(&profile))
            .unwrap_or_else(|| panic!("Cargo.toml declares no [profile.{profile}]"));
        assert_eq!(
            declared.get("inherits").and_then(|v| v.as_str()),
            Some("release"),
            "[profile.{profile}] builds on release"
        );
    }
    let binary = format!("/src/target/{profile}/sqlgrade");
    assert!(
        dockerfile
            .lines()
            .any(|l| l.starts_with("COPY --from=build") && l.contains(&binary)),
        "the image copies {binary}"
    );
}

#[test]
fn the_shipped_profile_is_whole_program_optimised() {
    let manifest: toml::Table = repo_file("Cargo.toml").parse().expect("Cargo.toml parses");
    let dist = manifest
        .get("profile")
        .and_then(|p| p.get("dist"))
        .expect("[profile.dist]");
    assert_eq!(dist.get("lto").and_then(|v| v.as_str()), Some("fat"));
    assert_eq!(
        dist.get("codegen-units").and_then(|v| v.as_integer()),
        Some(1)
    );
}
