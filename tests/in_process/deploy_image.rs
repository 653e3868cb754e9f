//! The container image (`deploy/compose/Dockerfile`) builds with a Cargo profile the workspace
//! declares (through `scripts/build-pgo.sh`, which builds it with profile-guided optimisation)
//! and copies the binary that profile writes: a renamed or removed profile, or a
//! `COPY` left pointing at another profile's directory, would otherwise surface only when
//! somebody builds the image (no test builds it; it needs Docker).

use std::path::Path;

fn repo_file(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

/// The profile the image builds: the argument of its `RUN scripts/build-pgo.sh PROFILE` line,
/// or the `--profile NAME` (or `--release`) of a `RUN cargo build` line.
fn built_profile(dockerfile: &str) -> String {
    if let Some(pgo) = dockerfile
        .lines()
        .find(|l| l.trim_start().starts_with("RUN scripts/build-pgo.sh"))
    {
        return pgo.split_whitespace().nth(2).unwrap_or("dist").to_string();
    }
    let build = dockerfile
        .lines()
        .find(|l| l.trim_start().starts_with("RUN cargo build"))
        .expect("the Dockerfile builds with `RUN scripts/build-pgo.sh` or `RUN cargo build`");
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

#[test]
fn the_pgo_build_is_executable_and_trains_on_events_the_image_has() {
    use std::os::unix::fs::PermissionsExt as _;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = root.join("scripts/build-pgo.sh");
    let mode = std::fs::metadata(&script)
        .expect("scripts/build-pgo.sh")
        .permissions()
        .mode();
    assert_ne!(mode & 0o111, 0, "scripts/build-pgo.sh is executable");
    let text = repo_file("scripts/build-pgo.sh");
    assert!(
        text.contains("path = \"$repo/examples/events.jsonl\""),
        "trains on the example"
    );
    assert!(root.join("examples/events.jsonl").is_file());
    // The image's switch (`--build-arg SQLGRADE_PGO=off`) reaches the script.
    assert!(text.contains("SQLGRADE_PGO"));
    assert!(repo_file("deploy/compose/Dockerfile").contains("ARG SQLGRADE_PGO=on"));
    // The build context keeps the example and the script (only build outputs are ignored).
    let ignored = repo_file(".dockerignore");
    for line in ignored
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        assert!(
            !"examples/events.jsonl".starts_with(line.trim_end_matches('/'))
                && !"scripts/build-pgo.sh".starts_with(line.trim_end_matches('/')),
            ".dockerignore leaves out {line}, which the image's build needs"
        );
    }
}
