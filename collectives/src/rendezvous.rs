//! Out-of-band exchange of a communicator's id: rank 0 makes it, every other rank needs it
//! before the communicator can be created. Through a file on a shared file system or a TCP
//! address, chosen from the same environment variables that `torchrun` and MPI launchers set,
//! so one program runs unchanged on one host or across hosts.
//!
//! Environment ([`Launch::from_env`], [`Rendezvous::from_env`]):
//! - `RANK`, `WORLD_SIZE` (required), `LOCAL_RANK` (the GPU on this host; default `RANK`);
//! - `FERROCUDA_RENDEZVOUS_FILE=<path>`: a file every rank can read (rank 0 writes it), or
//! - `MASTER_ADDR` + `MASTER_PORT`: rank 0 listens on that port (all interfaces), the others
//!   connect to `MASTER_ADDR:MASTER_PORT`;
//! - `FERROCUDA_RENDEZVOUS_TIMEOUT=<seconds>` (default 300).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// Where this process stands in a multi-process job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Launch {
    /// This process's rank, in `0..world_size`.
    pub rank: usize,
    /// The number of processes (ranks).
    pub world_size: usize,
    /// The GPU this process uses on its host (`LOCAL_RANK`, else `RANK`).
    pub local_rank: usize,
}

fn env_number(name: &'static str) -> Result<Option<usize>> {
    match std::env::var(name) {
        Ok(text) => text.trim().parse().map(Some).map_err(|_| Error::Env { name, problem: format!("{text:?} is not a non-negative integer") }),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(Error::Env { name, problem: "not valid UTF-8".into() }),
    }
}

fn required(name: &'static str) -> Result<usize> {
    env_number(name)?.ok_or(Error::Env {
        name,
        problem: "not set; start each process with RANK and WORLD_SIZE (a launcher such as torchrun or mpirun sets them), see docs/collectives.md".into(),
    })
}

impl Launch {
    /// Reads `RANK`, `WORLD_SIZE` and `LOCAL_RANK`.
    pub fn from_env() -> Result<Self> {
        let rank = required("RANK")?;
        let world_size = required("WORLD_SIZE")?;
        if rank >= world_size {
            return Err(Error::Env { name: "RANK", problem: format!("{rank} is not below WORLD_SIZE = {world_size}") });
        }
        let local_rank = env_number("LOCAL_RANK")?.unwrap_or(rank);
        Ok(Launch { rank, world_size, local_rank })
    }
}

/// How the ranks meet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rendezvous {
    /// Rank 0 writes the id into this file (atomically, by renaming); the others wait for it.
    /// It must not exist beforehand (rank 0 refuses a stale one); [`Rendezvous::finish`]
    /// removes it.
    File(PathBuf),
    /// Rank 0 listens on this `host:port`'s port (all interfaces); the others connect to it.
    Tcp(String),
}

const MAGIC: &[u8; 8] = b"FCRDV001";

impl Rendezvous {
    /// `FERROCUDA_RENDEZVOUS_FILE`, else `MASTER_ADDR` + `MASTER_PORT`.
    pub fn from_env() -> Result<Self> {
        if let Some(path) = std::env::var_os("FERROCUDA_RENDEZVOUS_FILE") {
            return Ok(Rendezvous::File(path.into()));
        }
        let addr = std::env::var("MASTER_ADDR").map_err(|_| Error::Env {
            name: "MASTER_ADDR",
            problem: "not set: set MASTER_ADDR and MASTER_PORT (rank 0's host and a free port), or FERROCUDA_RENDEZVOUS_FILE to a path every rank can read"
                .into(),
        })?;
        let port = required("MASTER_PORT")?;
        Ok(Rendezvous::Tcp(format!("{addr}:{port}")))
    }

    /// The wait limit from `FERROCUDA_RENDEZVOUS_TIMEOUT` (seconds), default 300 s.
    pub fn timeout_from_env() -> Result<Duration> {
        Ok(Duration::from_secs(env_number("FERROCUDA_RENDEZVOUS_TIMEOUT")?.unwrap_or(300) as u64))
    }

    fn method(&self) -> String {
        match self {
            Rendezvous::File(path) => format!("file {}", path.display()),
            Rendezvous::Tcp(addr) => format!("tcp {addr}"),
        }
    }

    fn error(&self, message: impl Into<String>) -> Error {
        Error::Rendezvous { method: self.method(), message: message.into() }
    }

    /// Gives every rank rank 0's `payload` (the other ranks' `payload` is ignored). Every rank
    /// of `world_size` must call it; it returns once this rank has the bytes, or fails after
    /// `timeout`. Over TCP it is also a barrier: rank 0 answers only once all have connected.
    pub fn share(&self, rank: usize, world_size: usize, payload: &[u8], timeout: Duration) -> Result<Vec<u8>> {
        if rank >= world_size {
            return Err(self.error(format!("rank {rank} is not below the world size {world_size}")));
        }
        let deadline = Instant::now() + timeout;
        match self {
            Rendezvous::File(path) => self.share_file(path, rank, world_size, payload, deadline),
            Rendezvous::Tcp(addr) => self.share_tcp(addr, rank, world_size, payload, deadline),
        }
    }

    /// Cleans up after every rank has its bytes (for a file, rank 0 removes it; call it after
    /// a collective step such as creating the communicator, which needs every rank).
    pub fn finish(&self, rank: usize) -> Result<()> {
        if let (Rendezvous::File(path), 0) = (self, rank) {
            std::fs::remove_file(path).map_err(|e| self.error(format!("could not remove the file: {e}")))?;
        }
        Ok(())
    }

    fn share_file(&self, path: &Path, rank: usize, world_size: usize, payload: &[u8], deadline: Instant) -> Result<Vec<u8>> {
        if rank == 0 {
            if path.exists() {
                return Err(self.error("the file already exists (left by an earlier run?): remove it or choose a fresh path"));
            }
            let mut content = Vec::with_capacity(payload.len() + 16);
            content.extend_from_slice(MAGIC);
            content.extend_from_slice(&(world_size as u32).to_le_bytes());
            content.extend_from_slice(&(payload.len() as u32).to_le_bytes());
            content.extend_from_slice(payload);
            let temporary = path.with_extension(format!("tmp-{}", std::process::id()));
            std::fs::write(&temporary, &content).map_err(|e| self.error(format!("could not write {}: {e}", temporary.display())))?;
            std::fs::rename(&temporary, path).map_err(|e| self.error(format!("could not rename {} into place: {e}", temporary.display())))?;
            return Ok(payload.to_vec());
        }
        loop {
            match std::fs::read(path) {
                Ok(content) => return self.parse_file(&content, world_size),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(self.error(format!("could not read the file: {e}"))),
            }
            if Instant::now() >= deadline {
                return Err(self.error("rank 0 did not write the file in time: is it running, and is the path on a file system every rank sees?"));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn parse_file(&self, content: &[u8], world_size: usize) -> Result<Vec<u8>> {
        if content.len() < 16 || &content[..8] != MAGIC {
            return Err(self.error("the file is not a ferrocuda rendezvous file"));
        }
        let theirs = u32::from_le_bytes(content[8..12].try_into().expect("4 bytes")) as usize;
        let len = u32::from_le_bytes(content[12..16].try_into().expect("4 bytes")) as usize;
        if theirs != world_size {
            return Err(self.error(format!("rank 0 has WORLD_SIZE {theirs}, this rank {world_size}")));
        }
        content.get(16..16 + len).map(<[u8]>::to_vec).ok_or_else(|| self.error("the file is truncated"))
    }

    fn share_tcp(&self, addr: &str, rank: usize, world_size: usize, payload: &[u8], deadline: Instant) -> Result<Vec<u8>> {
        let io = |what: &str, e: std::io::Error| self.error(format!("{what}: {e}"));
        if rank == 0 {
            let port = addr.rsplit_once(':').map(|(_, p)| p).ok_or_else(|| self.error("the address has no port"))?;
            let listener = TcpListener::bind(format!("0.0.0.0:{port}")).map_err(|e| io("could not listen (is MASTER_PORT free on rank 0's host?)", e))?;
            listener.set_nonblocking(true).map_err(|e| io("set_nonblocking", e))?;
            let mut peers: Vec<Option<TcpStream>> = (0..world_size).map(|_| None).collect();
            let mut joined = 1;
            while joined < world_size {
                match listener.accept() {
                    Ok((mut stream, _)) => {
                        stream.set_nonblocking(false).map_err(|e| io("set_nonblocking", e))?;
                        stream.set_read_timeout(Some(deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1)))).ok();
                        let mut hello = [0u8; 16];
                        stream.read_exact(&mut hello).map_err(|e| io("reading a rank's hello", e))?;
                        if &hello[..8] != MAGIC {
                            continue; // not one of ours (a port scanner, a stale client): ignore it
                        }
                        let their_rank = u32::from_le_bytes(hello[8..12].try_into().expect("4 bytes")) as usize;
                        let their_world = u32::from_le_bytes(hello[12..16].try_into().expect("4 bytes")) as usize;
                        if their_world != world_size {
                            return Err(self.error(format!("rank {their_rank} has WORLD_SIZE {their_world}, rank 0 {world_size}")));
                        }
                        if their_rank == 0 || their_rank >= world_size || peers[their_rank].is_some() {
                            return Err(self.error(format!("rank {their_rank} joined twice or is out of range: check RANK on every process")));
                        }
                        peers[their_rank] = Some(stream);
                        joined += 1;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        if Instant::now() >= deadline {
                            let missing: Vec<usize> = (1..world_size).filter(|&r| peers[r].is_none()).collect();
                            return Err(self.error(format!("ranks {missing:?} did not connect in time")));
                        }
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Err(e) => return Err(io("accept", e)),
                }
            }
            let mut answer = Vec::with_capacity(payload.len() + 12);
            answer.extend_from_slice(MAGIC);
            answer.extend_from_slice(&(payload.len() as u32).to_le_bytes());
            answer.extend_from_slice(payload);
            for stream in peers.iter_mut().flatten() {
                stream.write_all(&answer).map_err(|e| io("sending the id", e))?;
            }
            return Ok(payload.to_vec());
        }
        let mut stream = loop {
            let attempt = addr
                .to_socket_addrs()
                .map_err(|e| io("could not resolve MASTER_ADDR", e))?
                .find_map(|a| TcpStream::connect_timeout(&a, Duration::from_secs(1)).ok());
            if let Some(stream) = attempt {
                break stream;
            }
            if Instant::now() >= deadline {
                return Err(self.error("could not connect to rank 0 in time: is it running, and are MASTER_ADDR/MASTER_PORT right and reachable?"));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut hello = Vec::with_capacity(16);
        hello.extend_from_slice(MAGIC);
        hello.extend_from_slice(&(rank as u32).to_le_bytes());
        hello.extend_from_slice(&(world_size as u32).to_le_bytes());
        stream.write_all(&hello).map_err(|e| io("sending the hello", e))?;
        stream.set_read_timeout(Some(deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1)))).ok();
        let mut header = [0u8; 12];
        stream.read_exact(&mut header).map_err(|e| io("waiting for rank 0's answer (timed out?)", e))?;
        if &header[..8] != MAGIC {
            return Err(self.error("rank 0's answer is not a ferrocuda rendezvous"));
        }
        let len = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes")) as usize;
        let mut data = vec![0; len];
        stream.read_exact(&mut data).map_err(|e| io("reading the id", e))?;
        Ok(data)
    }
}
