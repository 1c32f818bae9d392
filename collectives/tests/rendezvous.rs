//! The rendezvous that shares a communicator's id: through a file and over TCP, between
//! threads and between processes of this machine.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use ferrocuda_collectives::{Error, Launch, Rendezvous};

const WAIT: Duration = Duration::from_secs(20);

fn fresh_path(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("ferrocuda-rdv-{name}-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

/// A port that was free a moment ago.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn share_on_threads(rendezvous: &Rendezvous, world: usize) -> Vec<Vec<u8>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..world)
            .map(|rank| {
                s.spawn(move || {
                    // Non-root ranks start first, so they must wait for rank 0.
                    if rank == 0 {
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    let mine: Vec<u8> = if rank == 0 { (0..128).collect() } else { vec![rank as u8] };
                    rendezvous.share(rank, world, &mine, WAIT).unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn file_rendezvous_gives_every_rank_rank_zeros_bytes() {
    let path = fresh_path("file");
    let rendezvous = Rendezvous::File(path.clone());
    let got = share_on_threads(&rendezvous, 4);
    assert!(got.iter().all(|g| *g == (0..128).collect::<Vec<u8>>()));
    rendezvous.finish(0).unwrap();
    assert!(!path.exists(), "rank 0's finish removes the file");
}

#[test]
fn file_rendezvous_refuses_a_stale_file() {
    let path = fresh_path("stale");
    std::fs::write(&path, b"old").unwrap();
    let err = Rendezvous::File(path.clone()).share(0, 2, b"id", WAIT).unwrap_err();
    assert!(err.to_string().contains("already exists"), "{err}");
    std::fs::remove_file(path).unwrap();
}

#[test]
fn file_rendezvous_reports_a_world_size_mismatch_and_a_missing_rank_zero() {
    let path = fresh_path("mismatch");
    let rendezvous = Rendezvous::File(path.clone());
    rendezvous.share(0, 3, b"id", WAIT).unwrap();
    let err = rendezvous.share(1, 2, b"", WAIT).unwrap_err();
    assert!(err.to_string().contains("WORLD_SIZE 3"), "{err}");
    rendezvous.finish(0).unwrap();
    let err = rendezvous.share(1, 2, b"", Duration::from_millis(50)).unwrap_err();
    assert!(matches!(err, Error::Rendezvous { .. }) && err.to_string().contains("did not write"), "{err}");
}

#[test]
fn tcp_rendezvous_gives_every_rank_rank_zeros_bytes() {
    let rendezvous = Rendezvous::Tcp(format!("127.0.0.1:{}", free_port()));
    let got = share_on_threads(&rendezvous, 5);
    assert!(got.iter().all(|g| *g == (0..128).collect::<Vec<u8>>()));
}

#[test]
fn tcp_rendezvous_times_out_when_a_rank_never_connects() {
    let rendezvous = Rendezvous::Tcp(format!("127.0.0.1:{}", free_port()));
    let err = rendezvous.share(0, 3, b"id", Duration::from_millis(200)).unwrap_err();
    assert!(err.to_string().contains("ranks [1, 2] did not connect"), "{err}");
    let err = rendezvous.share(1, 3, b"", Duration::from_millis(200)).unwrap_err();
    assert!(err.to_string().contains("could not connect to rank 0"), "{err}");
}

/// The child half of `rendezvous_across_processes`: runs only when the parent starts it.
#[test]
fn child_process_rank() {
    let Ok(expected) = std::env::var("FERROCUDA_TEST_CHILD_EXPECTS") else { return };
    let launch = Launch::from_env().unwrap();
    let got = Rendezvous::from_env().unwrap().share(launch.rank, launch.world_size, b"", WAIT).unwrap();
    assert_eq!(String::from_utf8(got).unwrap(), expected);
    println!("child rank {} (local {}) got the id", launch.rank, launch.local_rank);
}

/// Rank 0 here, ranks 1 and 2 in child processes configured only through the environment
/// variables a launcher sets (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT or the file).
#[test]
fn rendezvous_across_processes_from_the_environment() {
    let file = fresh_path("processes");
    for (kind, rendezvous) in [("tcp", Rendezvous::Tcp(format!("127.0.0.1:{}", free_port()))), ("file", Rendezvous::File(file.clone()))] {
        let payload = format!("id-over-{kind}");
        let children: Vec<_> = (1..3)
            .map(|rank| {
                let mut command = Command::new(std::env::current_exe().unwrap());
                command.args(["--exact", "child_process_rank", "--nocapture"]);
                command.env("FERROCUDA_TEST_CHILD_EXPECTS", &payload).env("RANK", rank.to_string()).env("WORLD_SIZE", "3").env("LOCAL_RANK", "0");
                match &rendezvous {
                    Rendezvous::Tcp(addr) => {
                        let (host, port) = addr.rsplit_once(':').unwrap();
                        command.env("MASTER_ADDR", host).env("MASTER_PORT", port).env_remove("FERROCUDA_RENDEZVOUS_FILE");
                    }
                    Rendezvous::File(path) => {
                        command.env("FERROCUDA_RENDEZVOUS_FILE", path);
                    }
                }
                command.spawn().unwrap()
            })
            .collect();
        rendezvous.share(0, 3, payload.as_bytes(), WAIT).unwrap();
        for mut child in children {
            assert!(child.wait().unwrap().success(), "a child rank failed ({kind})");
        }
        rendezvous.finish(0).unwrap();
    }
}

/// The child half of `launch_reads_rank_world_size_and_local_rank` (environment variables
/// are set only in child processes, never in this multi-threaded test binary).
#[test]
fn launch_env_child() {
    let Ok(expected) = std::env::var("FERROCUDA_TEST_LAUNCH_EXPECTS") else { return };
    let got = match Launch::from_env() {
        Ok(l) => format!("{},{},{}", l.rank, l.world_size, l.local_rank),
        Err(Error::Env { name, problem }) => format!("error {name}: {problem}"),
        Err(e) => panic!("unexpected error {e}"),
    };
    assert!(got.starts_with(&expected), "got {got:?}, expected {expected:?}");
}

#[test]
fn launch_reads_rank_world_size_and_local_rank() {
    for (rank, world, local, expected) in [
        ("3", "4", None, "3,4,3"),
        ("3", "4", Some("1"), "3,4,1"),
        ("4", "4", None, "error RANK: 4 is not below WORLD_SIZE = 4"),
        ("x", "4", None, "error RANK: \"x\" is not a non-negative integer"),
    ] {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command.args(["--exact", "launch_env_child"]).env("FERROCUDA_TEST_LAUNCH_EXPECTS", expected).env("RANK", rank).env("WORLD_SIZE", world);
        match local {
            Some(l) => command.env("LOCAL_RANK", l),
            None => command.env_remove("LOCAL_RANK"),
        };
        assert!(command.output().unwrap().status.success(), "RANK={rank} WORLD_SIZE={world} LOCAL_RANK={local:?}: expected {expected}");
    }
}
