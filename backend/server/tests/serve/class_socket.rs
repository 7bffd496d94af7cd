//! The class listener's Unix socket, for learners on the instructor's host: a follower server
//! joins through it as the account the kernel credits its connection to; nobody else can take
//! its place (its directory must be the instructor's alone, a live socket is never replaced);
//! with a TCP port beside it, the room's link leads to the socket and invitations to the port.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use scalebook_shared::protocol::{ClassAddress, ClassLink, ClassState, ClientMessage, FollowerIdentity, Secret, ServerMessage};

use crate::harness::{Server, serve_in, temp_dir, write_stub_page};

const WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// A directory for the socket, with `mode`.
fn socket_dir(name: &str, mode: u32) -> tempfile::TempDir {
    let dir = temp_dir(name);
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(mode)).unwrap();
    dir
}

/// Why `scalebook serve` with `args` did not start.
fn refused_start(name: &str, args: &[&str]) -> String {
    let dir = temp_dir(name);
    let log = dir.path().join("server.log");
    write_stub_page(&dir.path().join("static"));
    serve_in(dir.path(), args).log_to(&log).start().err().map(|e| e.to_string()).expect("the server started")
}

fn flags<'a>(socket: &'a str, keys: &'a Path) -> Vec<&'a str> {
    vec!["--class-socket", socket, "--class-dir", keys.to_str().unwrap()]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learner_on_this_host_joins_through_the_class_socket_as_their_account() {
    let (dir, keys) = (socket_dir("class-socket", 0o711), temp_dir("class-socket-keys"));
    let socket = dir.path().join("class.sock");
    let socket_text = socket.to_str().unwrap();
    let server = Server::start("class-socket", &flags(socket_text, keys.path()));
    let link = ClassLink::parse(server.class_link.as_deref().expect("no class link printed")).unwrap();
    assert_eq!(link.address, ClassAddress::Unix(socket_text.into()), "the room's link leads to the socket");
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o666, "every learner on the host may connect (and shows the class's token)");

    let learner_keys = temp_dir("class-socket-learner-keys");
    let env = [("SCALEBOOK_CLASS_LINK", link.to_string()), ("XDG_DATA_HOME", learner_keys.path().display().to_string())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let learner = Server::start_with_env("class-socket-learner", &["--class-name", "someone else"], &env);
    let mut page = learner.connect().await;
    let follows = |s: &ClassState| matches!(s, ClassState::Joined { .. });
    page.recv_until(WAIT, |m| matches!(m, ServerMessage::Class(s) if follows(s)).then_some(())).await;
    let mut instructor = server.connect().await;
    let me = nix::unistd::User::from_uid(nix::unistd::getuid()).unwrap().unwrap().name;
    let identity = instructor
        .recv_until(WAIT, |m| match m {
            ServerMessage::Roster { followers, .. } => followers.first().map(|f| (f.identity.clone(), f.name.clone())),
            _ => None,
        })
        .await;
    assert_eq!(identity, (FollowerIdentity::Account { user: me }, "someone else".into()), "the kernel's word, the learner's label");

    // Nobody takes a live socket's place, even another server of the instructor's.
    let taken = refused_start("class-socket-again", &flags(socket_text, keys.path()));
    assert!(taken.contains("--class-socket") && taken.contains("a running server listens on it"), "{taken}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_others_could_replace_is_refused_and_invitations_lead_to_the_port() {
    let keys = temp_dir("class-socket-shared-keys");
    // A directory others may write: someone could put their own socket in the class's place.
    let shared = socket_dir("class-socket-shared", 0o777);
    let socket = shared.path().join("class.sock");
    let refused = refused_start("class-socket-shared-start", &flags(socket.to_str().unwrap(), keys.path()));
    assert!(refused.contains("--class-socket") && refused.contains("writable by you alone"), "{refused}");
    assert!(!socket.exists(), "a refused socket was left behind");
    let relative = refused_start("class-socket-relative", &flags("../class.sock", keys.path()));
    assert!(relative.contains("--class-socket"), "{relative}");

    // Both doors: the room on this host's socket, an invited learner from anywhere.
    let own = socket_dir("class-socket-both", 0o711);
    let socket = own.path().join("class.sock");
    let mut args = flags(socket.to_str().unwrap(), keys.path());
    args.extend(["--class-listen", "127.0.0.1:0"]);
    let server = Server::start("class-socket-both", &args);
    let link = ClassLink::parse(server.class_link.as_deref().unwrap()).unwrap();
    assert!(matches!(link.address, ClassAddress::Unix(_)), "{link:?}");
    let mut instructor = server.connect().await;
    instructor.send(&ClientMessage::Invite { name: "ada".into() }).await;
    let invited = instructor
        .recv_until(WAIT, |m| match m {
            ServerMessage::Invitation { link: Secret(link), .. } => Some(ClassLink::parse(link).unwrap()),
            _ => None,
        })
        .await;
    assert!(matches!(&invited.address, ClassAddress::Tcp { host, .. } if host == "127.0.0.1"), "{invited:?}");
}
