//! A class of many Scalebooks under a real JupyterHub (DummyAuthenticator, LocalProcessSpawner,
//! configurable-http-proxy), as README's "A class of many Scalebooks" holds one: the
//! instructor installs once for everyone, and each of three real Unix users (`instructor`,
//! `learner1`, `learner2`) runs that install through jupyter-server-proxy in their own Jupyter
//! server, with the README's entries in their own `~/.jupyter/jupyter_server_config.py`: the
//! instructor's holds the class (`--class-socket` for learners on this host, `--class-listen`
//! for invitations), the learners' follow it (`SCALEBOOK_CLASS_LINK`: learner1 the room's link,
//! sharing its runs; learner2 an invitation, as a learner on another host would). Nobody is
//! granted anything on anybody's server. Each logs in through the Hub in a browser of their
//! own; then, in order: learner2 holds the class port as the instructor's Scalebook starts, and
//! its page says so; learner2 cannot take the class socket's place; learner1 joins through the
//! socket at once; learner2's server keeps trying the port, and joins by itself once learner2
//! lets the port go; the instructor
//! presents another chapter and the learners' pages go there; the instructor's run is charted
//! live on the learners' pages, from their own servers' copies; learner1's own run runs as
//! learner1; the instructor's roster lists both learners by their Unix names, with learner1's
//! run, which the instructor charts from the roster; a raw client run as learner2 with the class
//! link cannot pass for learner1 (the roster shows its account), cannot write into the copy of
//! learner1's run, and once removed cannot come back under another name; learner1 is refused
//! the instructor's server by the Hub; and no log holds the instructor's token or the class
//! link's.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, ensure};
use scalebook_e2e::by_hand::{Event, RawFollower, Squatter};
use scalebook_e2e::hub::{self, Hub, readme_recipe_for};
use scalebook_e2e::install::install;
use scalebook_e2e::notebook::{STEP_LOSS, launch_tiny_run, series_css, watch_growth};
use scalebook_e2e::{Browser, WAIT, free_port, workspace_root};
use scalebook_shared::protocol::{
    ClassAddress, ClassLink, ClassState, ClientMessage, FollowerIdentity, Introduction, RunState, Secret, ServerMessage,
};
use scalebook_shared::rundir;

const INSTRUCTOR: &str = "instructor";
const LEARNERS: [&str; 2] = ["learner1", "learner2"];
/// The instructor's run: long enough (about 30 s alone on two cores) to be watched growing on
/// the learners' pages and to be still training when a learner launches a run of their own.
const INSTRUCTOR_ITERS: u32 = 1000;
/// A learner's own run: one epoch of cpu_tiny, the shortest run the server accepts.
const LEARNER_ITERS: u32 = 4;
/// How long a learner's run may take while three servers, three browsers and the instructor's
/// run share two cores with builds.
const RUN_LIMIT: Duration = Duration::from_secs(300);
/// How a learner's server names its copy of an instructor's run (README: `i-RUN`).
const COPY_PREFIX: &str = "i-";

fn account(user: &str) -> FollowerIdentity {
    FollowerIdentity::Account { user: user.into() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_class_of_many_scalebooks_runs_under_jupyterhub() -> anyhow::Result<()> {
    let Some(hub) = Hub::start(&[INSTRUCTOR, LEARNERS[0], LEARNERS[1]])? else {
        eprintln!("not root: only root can start Jupyter servers as other users (the JupyterHub class test is skipped)");
        return Ok(());
    };
    // The instructor installs once for everyone, where every user can read it (kept between
    // test runs: installing over it again copies only what changed).
    let prefix = hub::environment().join("scalebook");
    install(&workspace_root().canonicalize()?, &prefix)?;
    let recipe = readme_recipe_for(&prefix)?;

    // 1. The instructor logs in through the Hub and opens their Scalebook (the Unix socket
    // entry), which holds the class: its socket in a directory of theirs others may enter.
    let class_port = free_port()?;
    let socket = hub.reachable_dir(INSTRUCTOR, "scalebook-class")?.join("class.sock");
    let entry = "c.ServerProxy.servers[\"scalebook\"]";
    hub.write_jupyter_config(
        INSTRUCTOR,
        &format!(
            "{recipe}\n# The class, as README's \"A class of many Scalebooks\" says.\n\
             {entry}[\"command\"] += [\"--class-socket\", os.path.expanduser(\"~/scalebook-class/class.sock\"), \"--class-listen\", \"127.0.0.1:{class_port}\"]\n"
        ),
    )?;
    // The class port is taken by another user (learner2, by hand) when the instructor's
    // Scalebook starts: it starts anyway, and the page says so.
    let squatter = Squatter::hold(LEARNERS[1], class_port).await?;
    let instructor = Browser::start().await?;
    hub.open_as(&instructor, INSTRUCTOR, "scalebook/").await?;
    instructor.client.goto(&format!("{}/user/{INSTRUCTOR}/scalebook/#/model-and-data", hub.url)).await?;
    instructor.wait_attr(".connection", "data-state", |s| s == "open").await?;
    let unbound = instructor.wait_text(".classroom .class-unbound", |t| t.contains("not listening")).await;
    unbound.context("the instructor's page does not say the class port is taken")?;
    let mut instructor_socket = hub.socket(&instructor, INSTRUCTOR, "scalebook").await?;

    // 2. The instructor's page gets the class link; the learners' servers follow it from their
    // entries' environment (so the learners log in once it is known), and their pages open
    // through the Hub.
    let link = instructor_socket
        .recv_until(WAIT, |m| match m {
            ServerMessage::ClassLink { link: Some(Secret(link)), .. } => Some(link.clone()),
            _ => None,
        })
        .await?;
    let link = ClassLink::parse(&link).map_err(|problems| anyhow::anyhow!("not a class link: {problems}"))?;
    let socket_text = socket.to_str().context("a socket path in UTF-8")?;
    ensure!(link.address == ClassAddress::Unix(socket_text.into()), "the room's link leads to {}, not the class socket", link.address());
    // learner2 cannot take the socket's place: its directory is the instructor's alone.
    let squatted = Squatter::take_socket(LEARNERS[1], &socket).await?;
    ensure!(squatted.as_deref() == Some("Permission denied"), "learner2 took the class socket's place: {squatted:?}");
    // learner2 follows with an invitation, over the port (as from another host).
    instructor_socket.send(&ClientMessage::Invite { name: LEARNERS[1].into() }).await?;
    let invitation = instructor_socket
        .recv_until(WAIT, |m| match m {
            ServerMessage::Invitation { link: Secret(link), .. } => Some(link.clone()),
            _ => None,
        })
        .await?;
    let invitation = ClassLink::parse(&invitation).map_err(|problems| anyhow::anyhow!("not an invitation: {problems}"))?;
    ensure!(matches!(invitation.address, ClassAddress::Tcp { port, .. } if port == class_port), "{invitation:?} is not the port's");
    let mut learners = Vec::new();
    for name in LEARNERS {
        let share = if name == LEARNERS[0] { format!("{entry}[\"command\"] += [\"--share-runs\"]\n") } else { String::new() };
        // The link in a file only the learner can read, the entry naming the file (README).
        let their_link = if name == LEARNERS[0] { &link } else { &invitation };
        hub.write_private(name, ".config/scalebook/class-link", &their_link.to_string())?;
        let follow = format!(
            "{entry}[\"environment\"] = {{\"SCALEBOOK_CLASS_LINK\": \"@\" + os.path.expanduser(\"~/.config/scalebook/class-link\")}}\n"
        );
        hub.write_jupyter_config(
            name,
            &format!("{recipe}\n# Following the class, as README's \"A class of many Scalebooks\" says.\n{follow}{share}"),
        )?;
        let browser = Browser::start().await?;
        hub.open_as(&browser, name, "scalebook/").await?;
        browser.client.goto(&format!("{}/user/{name}/scalebook/#/rank-groups", hub.url)).await?;
        browser.wait_attr(".connection", "data-state", |s| s == "open").await?;
        let mut socket = hub.socket(&browser, name, "scalebook").await?;
        let joined = |m: &ServerMessage| matches!(m, ServerMessage::Class(ClassState::Joined { .. })).then_some(());
        if name == LEARNERS[0] {
            // The port held changes nothing for a learner on the socket.
            socket.recv_until(WAIT, joined).await.with_context(|| format!("{name}'s server did not join through the class socket"))?;
        } else {
            // The port is still learner2's: the invited server keeps trying, saying what it met.
            let waiting =
                |m: &ServerMessage| matches!(m, ServerMessage::Class(ClassState::Connecting { warning: Some(_), .. })).then_some(());
            socket.recv_until(WAIT, waiting).await.with_context(|| format!("{name}'s server did not say the class is out of reach"))?;
        }
        learners.push((name, browser, socket));
    }
    // learner2 lets the port go: the instructor's class listener takes it, and the invited
    // server joins by itself.
    drop(squatter);
    instructor.wait_eval("document.querySelector('.classroom .class-unbound') === null").await?;
    let (name, _, waiting) = &mut learners[1];
    let joined = |m: &ServerMessage| matches!(m, ServerMessage::Class(ClassState::Joined { .. })).then_some(());
    waiting.recv_until(WAIT, joined).await.with_context(|| format!("{name}'s server did not join the class once the port was free"))?;

    // 3. The instructor presents, and moves to another chapter: the learners' pages follow.
    instructor.click(".classroom button.present").await?;
    instructor.wait_attr(".classroom button.present", "aria-pressed", |p| p == "true").await?;
    for (name, browser, _) in &learners {
        let presented = browser.wait_attr("article.chapter", "data-chapter", |c| c == "model-and-data").await;
        presented.with_context(|| format!("{name}'s page did not go to the presented chapter"))?;
    }
    instructor.click("nav.toc a[href='#/single-gpu']").await?;
    for (name, browser, _) in &learners {
        let followed = browser.wait_attr("article.chapter", "data-chapter", |c| c == "single-gpu").await;
        followed.with_context(|| format!("{name}'s page did not follow the instructor to another chapter"))?;
    }
    // The instructor's run is charted live on both learners' pages, from their own servers'
    // copies.
    let run = launch_tiny_run(&instructor, INSTRUCTOR_ITERS).await?;
    let copy = series_css(STEP_LOSS, &format!("{COPY_PREFIX}{run}"));
    let ((_, first, _), (_, second, _)) = (&learners[0], &learners[1]);
    let (seen1, seen2) = tokio::try_join!(watch_growth(first, &copy, 2, RUN_LIMIT), watch_growth(second, &copy, 2, RUN_LIMIT))?;
    println!("the learners' pages drew the instructor's run growing: {seen1:?}, {seen2:?}");

    // 4. learner1 launches a run of their own from their page while the instructor's still
    // trains: it starts at once (the instructor's run trains on the instructor's side and takes
    // none of learner1's room), as learner1, in learner1's home.
    let learner1 = LEARNERS[0];
    let (_, own_browser, own_socket) = &mut learners[0];
    launch_tiny_run(own_browser, LEARNER_ITERS).await?;
    let mut last = None;
    let ended = own_socket
        .recv_until(RUN_LIMIT, |m| match m {
            ServerMessage::RunUpdate { run } if !run.id.as_str().starts_with(COPY_PREFIX) => {
                last = Some(run.state());
                run.state().is_final().then(|| run.clone())
            }
            _ => None,
        })
        .await
        .with_context(|| format!("{learner1}'s own run did not end; the last state its server told: {last:?}"))?;
    let own_run = ended.id.clone();
    let run_dir = hub.home(learner1).join("scalebook/runs").join(own_run.as_str());
    let job_log = std::fs::read_to_string(run_dir.join(rundir::JOB_LOG)).unwrap_or_default();
    ensure!(ended.state() == RunState::Completed, "{learner1}'s run ended {:?} ({:?}); its log:\n{job_log}", ended.state(), ended.reason());
    let uid = hub.user(learner1).uid;
    for path in [run_dir.clone(), run_dir.join(rundir::METRICS)] {
        let owner = std::fs::metadata(&path).with_context(|| format!("no {}", path.display()))?.uid();
        ensure!(owner == uid, "{} belongs to uid {owner}, not to {learner1} ({uid})", path.display());
    }

    // 5. The instructor's roster lists both learners by their Unix names, and the run learner1
    // shares; learner2 shares none.
    let roster = instructor_socket
        .recv_until(WAIT, |m| match m {
            ServerMessage::Roster { followers, .. }
                if LEARNERS.iter().all(|name| followers.iter().any(|f| f.name == *name))
                    && followers.iter().any(|f| f.name == learner1 && f.runs.iter().flatten().any(|r| r.id == own_run)) =>
            {
                Some(followers.clone())
            }
            _ => None,
        })
        .await
        .context("the roster never listed both learners and learner1's run")?;
    ensure!(roster.iter().filter(|f| f.name == LEARNERS[1]).all(|f| f.runs.is_none()), "learner2 shares no runs: {roster:?}");
    // The instructor charts it from the roster, beside their own run: their server copies it
    // from learner1's.
    instructor.click(".classroom button.class-toggle").await?;
    instructor.click(&format!("table.roster tr[data-run='{own_run}'] input.chart-shared")).await?;
    let shared = series_css(STEP_LOSS, &format!("l-{learner1}-{own_run}"));
    let drawn = watch_growth(&instructor, &shared, 1, RUN_LIMIT).await;
    drawn.with_context(|| format!("the instructor's page did not chart {learner1}'s run from the roster"))?;

    // 6. learner2, holding the class link, tries by hand (a raw client run as learner2) to pass
    // for learner1: the roster shows who it is, it cannot write into learner1's copy, and once
    // removed it cannot come back under another name.
    let copy_dir = hub.home(INSTRUCTOR).join("scalebook/runs").join(format!("l-{learner1}-{own_run}"));
    let metrics = |dir: &Path| std::fs::read(dir.join(rundir::METRICS)).unwrap_or_default();
    let deadline = tokio::time::Instant::now() + WAIT;
    while metrics(&copy_dir) != metrics(&run_dir) {
        ensure!(tokio::time::Instant::now() < deadline, "the instructor's copy of {learner1}'s run never held all its points");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let learner2 = LEARNERS[1];
    let mut posing = RawFollower::connect_as(learner2, &link).await?;
    posing.send(&ClientMessage::Introduce(Introduction { name: learner1.into(), runs: None })).await?;
    let impostor = instructor_socket
        .recv_until(WAIT, |m| match m {
            ServerMessage::Roster { followers, .. } => {
                followers.iter().find(|f| f.name == learner1 && f.identity != account(learner1)).cloned()
            }
            _ => None,
        })
        .await
        .context("the roster never showed the raw client posing as learner1")?;
    ensure!(impostor.identity == account(learner2), "a client run as {learner2} passed for {:?}", impostor.identity);
    let lines = metrics(&run_dir).iter().filter(|b| **b == b'\n').count();
    posing
        .send_json(&serde_json::json!({"type": "shared_points", "run": own_run, "after": lines,
            "points": [{"seq": lines + 1, "step": 100000, "epoch": 1, "wall": 0.0, "tag": "Loss/train", "value": 42.0}]}))
        .await?;
    let refused = posing
        .recv_until(WAIT, |e| match e {
            Event::Message(message) => match message.as_ref() {
                ServerMessage::Error(report) => Some(report.clone()),
                _ => None,
            },
            Event::Closed { .. } => None,
        })
        .await?;
    let on_run = refused.problems.0.iter().find(|p| p.field == "run").map(|p| p.message.as_str()).unwrap_or_default();
    ensure!(on_run.contains("not asked for"), "forged points were not refused as another's: {refused:?}");
    ensure!(metrics(&copy_dir) == metrics(&run_dir), "the instructor's copy of {learner1}'s run is no longer {learner1}'s file");
    // The instructor removes the impostor from the roster: every connection of learner2 goes,
    // and learner2 cannot come back under another name.
    instructor.click(&format!("table.roster tr[data-follower='{}'] button.remove", impostor.id)).await?;
    posing.recv_until(WAIT, |e| matches!(e, Event::Closed { code: Some(4403), .. }).then_some(())).await?;
    let mut again = RawFollower::connect_as(learner2, &link).await?;
    again.send(&ClientMessage::Introduce(Introduction { name: "learner2 again".into(), runs: None })).await?;
    let reason = again
        .recv_until(WAIT, |e| match e {
            Event::Closed { code: Some(4403), reason } => Some(reason.clone()),
            _ => None,
        })
        .await
        .context("a removed learner came back under another name")?;
    ensure!(reason.contains("removed"), "{reason}");

    // 7. learner1 may not open the instructor's server: the Hub refuses.
    own_browser.client.goto(&format!("{}/user/{INSTRUCTOR}/scalebook/", hub.url)).await?;
    own_browser.wait_text("h1", |t| t.starts_with("403")).await?;
    let path = own_browser.eval("return location.pathname").await?;
    ensure!(path.as_str().is_some_and(|p| p.starts_with("/hub/")), "the 403 is not the Hub's: {path}");

    // 8. The instructor opens the port entry with its token in the fragment; then no log of the
    // class (the Hub's, the proxy's, each Jupyter server's, each Scalebook's, the runs')
    // holds that token or the class link's.
    // (The token is where the README's block keeps it, readable by its owner only.)
    let token_file = hub.home(INSTRUCTOR).join(".config/scalebook/port-token");
    let mode = std::fs::metadata(&token_file).with_context(|| format!("no {}", token_file.display()))?.mode() & 0o777;
    ensure!(mode == 0o600, "{} has mode {mode:o}: others may read the token", token_file.display());
    let token = std::fs::read_to_string(&token_file)?.trim().to_owned();
    instructor.client.goto(&format!("{}/user/{INSTRUCTOR}/scalebook-port/#token={token}", hub.url)).await?;
    instructor.wait_attr(".connection", "data-state", |s| s == "open").await?;
    for (_, browser, _) in learners {
        browser.close().await?;
    }
    instructor.close().await?;
    // After the class, nothing of anyone's runs (the learners' own, their copies of the
    // instructor's, the instructor's copies of theirs) is open to another user, and no
    // Jupyter config holds a secret.
    for name in [INSTRUCTOR, LEARNERS[0], LEARNERS[1]] {
        let open = Hub::open_to_others(&hub.home(name).join("scalebook/runs"))?;
        ensure!(open.is_empty(), "{name}'s runs open to others: {open:?}");
        let config = std::fs::read_to_string(hub.home(name).join(".jupyter/jupyter_server_config.py"))?;
        let secrets = [&token, &link.token, &invitation.token];
        ensure!(!secrets.iter().any(|secret| config.contains(secret.as_str())), "{name}'s Jupyter config holds a token");
    }
    let logs = hub.logs()?;
    let class_started = format!("Class listener on {socket_text}");
    ensure!(logs[0].1.contains(&class_started), "the Hub's log does not hold the Scalebooks' output (no {class_started:?})");
    for (path, text) in &logs {
        ensure!(!text.contains(&token), "{} holds the instructor's token", path.display());
        ensure!(!text.contains(&link.token), "{} holds the class link's token", path.display());
        ensure!(!text.contains(&invitation.token), "{} holds the invitation's token", path.display());
    }
    Ok(())
}
