//! `./scalebook.sh install PREFIX`, as an instructor runs it once for a class, and the install
//! as a learner uses it: another Unix user (made by the test), with a home of their own and a
//! clean environment, runs `PREFIX/bin/scalebook`, reads the API with the token, launches
//! `cpu_tiny` and sees it complete, with nothing loaded from the checkout or the builder's cache.
//! A re-install over the running install replaces what changed and copies nothing else.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, ensure};
use scalebook_e2e::install::{InstalledServer, User, install, install_command, not_world_readable};
use scalebook_e2e::workspace_root;
use scalebook_shared::protocol::RunState;

/// The Unix user the learner's part runs as.
const LEARNER: &str = "scalebook-learner";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_install_serves_another_user_without_the_checkout_or_the_builders_cache() -> anyhow::Result<()> {
    let user = match User::unprivileged(LEARNER)? {
        Some(user) => user,
        None => {
            eprintln!(
                "not root: the install is run as this same user, since only root can act as another (the part of the test that needs an unprivileged user is skipped)"
            );
            User::current()?
        }
    };
    // A scratch directory every user can enter (temporary directories are private).
    let scratch = tempfile::Builder::new().prefix("scalebook-install-").tempdir()?;
    set_mode(scratch.path(), 0o755)?;

    // Called from the scratch directory with a relative prefix, as from anywhere.
    install(scratch.path(), Path::new("prefix"))?;
    let prefix = scratch.path().join("prefix");
    let wrong = not_world_readable(&prefix)?;
    ensure!(wrong.is_empty(), "not readable by everyone as installed (path, mode): {wrong:?}");

    let home = scratch.path().join("home");
    std::fs::create_dir(&home)?;
    std::os::unix::fs::chown(&home, Some(user.uid), Some(user.gid))?;

    // A directory with files no install put there is refused (an install removes what it no
    // longer ships from its own directories: in /usr/local, those are everyone's lib/ and bin/).
    let refused = install_command(scratch.path(), scratch.path()).output()?;
    let said = String::from_utf8_lossy(&refused.stderr);
    ensure!(refused.status.code() == Some(2) && said.contains("no Scalebook install put there"), "{:?}: {said}", refused.status);

    // Every library the trainer loads, as the user finds it, is the system's or the install's.
    let output = user.command(&home, "ldd", &[]).arg(prefix.join("libexec/scalebook-train")).output()?;
    ensure!(output.status.success(), "ldd as {}: {}", user.name, String::from_utf8_lossy(&output.stderr));
    let listing = String::from_utf8(output.stdout)?;
    ensure!(!listing.contains("not found"), "a library not found:\n{listing}");
    let libraries = listing.lines().filter_map(|line| line.split_once(" => ")?.1.split(" (").next()).map(std::fs::canonicalize);
    let libraries = libraries.collect::<Result<Vec<_>, _>>()?;
    for builders in builders_places()? {
        ensure!(!libraries.iter().any(|lib| lib.starts_with(&builders)), "a library from {}:\n{listing}", builders.display());
    }
    ensure!(libraries.contains(&prefix.canonicalize()?.join("lib/torch/lib/libtorch_cpu.so")), "libtorch is not the install's:\n{listing}");

    // Subcommands other than serve pass through.
    let layout = user.command(&home, prefix.join("bin/scalebook"), &[]).args(["layout", "--tp", "2", "--dp", "2"]).output()?;
    ensure!(layout.status.success(), "scalebook layout: {}", String::from_utf8_lossy(&layout.stderr));
    ensure!(String::from_utf8(layout.stdout)?.contains("tp-dp"), "scalebook layout printed no tp-dp groups");

    let server = InstalledServer::start(&user, &home, &prefix)?;
    let (status, health) = server.get("/api/health")?;
    ensure!(status == 200 && health.contains("\"ok\""), "/api/health: {status} {health}");
    let (status, configs) = server.get("/api/configs")?;
    ensure!(status == 200 && configs.contains("\"cpu_tiny\""), "/api/configs: {status} {configs}");
    // A chapter's code block reads the installed source (the project is the install).
    let (status, code) = server.get("/api/code?path=shared/src/layout/groups.rs&item=Layout::groups")?;
    ensure!(status == 200, "/api/code: {status} {code}");

    // A re-install while the server runs: a file that differs from the build is replaced by a
    // new one renamed over it (a reader holding the old one keeps it whole), and an unchanged
    // one, the patched trainer included, is not copied again.
    let style = prefix.join("static/style.css");
    std::fs::write(&style, "/* changed by hand */")?;
    let trainer = prefix.join("libexec/scalebook-train");
    let (style_before, trainer_before, trainer_bytes) = (inode(&style)?, inode(&trainer)?, std::fs::read(&trainer)?);
    install(scratch.path(), &prefix)?;
    ensure!(std::fs::read(&style)? == std::fs::read(workspace_root().join("static/style.css"))?, "style.css was not restored");
    ensure!(inode(&style)? != style_before, "style.css was rewritten in place, not replaced");
    // Another checkout's build sharing the cache may have rebuilt the trainer in between: then
    // it is rightly copied; unchanged, it must not be.
    let copied = inode(&trainer)? != trainer_before;
    ensure!(!copied || std::fs::read(&trainer)? != trainer_bytes, "the unchanged trainer was copied again");

    // A learner's run of one epoch (the shortest the server accepts), launched as the page
    // does, trains on the installed data and libraries and is written to the user's home, as
    // theirs.
    let run = server.launch("cpu_tiny", &["num_iters=4"]).await?;
    let record = server.wait_until_ended(&run, Duration::from_secs(240)).await?;
    let run_dir = home.join("scalebook/runs").join(&run);
    let log = std::fs::read_to_string(run_dir.join("job.log")).unwrap_or_default();
    ensure!(record.state() == RunState::Completed, "run {run} ended {:?} ({:?}); its log:\n{log}", record.state(), record.reason());
    let owner = std::fs::metadata(&run_dir).with_context(|| format!("no run directory {}", run_dir.display()))?.uid();
    ensure!(owner == user.uid, "{} belongs to uid {owner}, not to {}", run_dir.display(), user.name);
    Ok(())
}

/// Where the build's files are, which no user of the install may need: the builder's home
/// (root's, where the cache is) and the torch wheel the build linked (its site-packages).
fn builders_places() -> anyhow::Result<Vec<PathBuf>> {
    let mut places = vec![PathBuf::from(std::env::var_os("HOME").context("no HOME")?)];
    if let Some(libtorch) = std::env::var_os("LIBTORCH") {
        places.extend(std::fs::canonicalize(libtorch)?.parent().map(Path::to_path_buf));
    }
    Ok(places)
}

fn inode(path: &Path) -> anyhow::Result<u64> {
    Ok(std::fs::metadata(path)?.ino())
}

fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}
