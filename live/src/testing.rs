//! Test fixtures against a real Redis, on loopback only: a `redis-server` child process on a
//! free port, and a TCP forwarder that can be taken down and brought back (seed 001's test
//! rig). Public so that integration tests (and a calibration run) share them.
//!
//! Bounds: starting a server waits at most [`START_WAIT_MAX`] for it to answer PING; every
//! server is killed when its handle drops; the forwarder ([`Forwarder`]) binds 127.0.0.1 only.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener as StdListener, TcpStream as StdStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Seed 001's TCP forwarder (the one a live run puts in front of its connections), for the
/// tests that take one down by hand.
pub use crate::forwarder::Forwarder;

/// How long [`RedisServer::start`] waits for the server to answer PING.
pub const START_WAIT_MAX: Duration = Duration::from_secs(10);

/// Set (to anything) to make a missing `redis-server` a failure rather than a skip.
pub const REQUIRE_REDIS_VAR: &str = "OUTAGELAB_REQUIRE_REDIS";

const LOOPBACK: Ipv4Addr = Ipv4Addr::LOCALHOST;

/// Set (to anything) to hold the timing-sensitive bounds: how many milliseconds a live run
/// may take beyond its simulation, and that its runner woke on time. Those compare wall-clock
/// time on this machine with virtual time, and a machine busy with other work (a laptop
/// compiling, two test binaries at once) makes them miss without anything being wrong, so
/// the plain `cargo test --workspace` leaves them out and `.ci/run` holds them in a step of
/// its own with this set. What a live run decides (counts, outcomes, which requests fail)
/// and the bounds that a busy machine cannot break (a live run is never faster than its
/// simulation: timers do not fire early) are held either way.
pub const TIMING_TESTS_VAR: &str = "OUTAGELAB_TIMING_TESTS";

/// Whether [`TIMING_TESTS_VAR`] is set. When it is not, says loudly on standard error that
/// the timing-sensitive part `what` was left out, and how to hold it.
pub fn timing_tests(what: &str) -> bool {
    if std::env::var_os(TIMING_TESTS_VAR).is_some() {
        return true;
    }
    // Written to the stream itself, not through `eprintln!`, which the test harness captures
    // and hides for a test that passes.
    let _ = writeln!(
        std::io::stderr(),
        "\n-------- NOT HELD (timing-sensitive): {what}. Set {TIMING_TESTS_VAR}=1 to hold it \
         on an otherwise idle machine; .ci/run does, in its timing step. --------\n"
    );
    false
}

/// A `redis-server` on 127.0.0.1, persistence off, in a temporary directory; killed on drop.
pub struct RedisServer {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl RedisServer {
    /// Starts one, or returns `None` after a loud message on standard error if `redis-server`
    /// is not installed (the caller skips its test; `.ci/run` installs it and sets
    /// [`REQUIRE_REDIS_VAR`], under which a missing binary fails the test instead).
    /// Panics if the binary is there but the server does not answer within
    /// [`START_WAIT_MAX`].
    pub fn start() -> Option<RedisServer> {
        let port = free_port();
        let dir =
            std::env::temp_dir().join(format!("outagelab-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory for redis-server");
        let child = match Self::spawn(port, &dir) {
            Ok(child) => child,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                assert!(
                    std::env::var_os(REQUIRE_REDIS_VAR).is_none(),
                    "redis-server is not installed, and {REQUIRE_REDIS_VAR} says this run must \
                     not skip the tests against a real Redis"
                );
                // Written to the stream itself, not through `eprintln!`, which the test harness
                // captures and hides for a test that passes.
                let _ = writeln!(
                    std::io::stderr(),
                    "\n!!!!!!!! SKIPPED: redis-server is not installed, so this test against a \
                     real Redis did not run. Install it (apt-get install -y redis-server); \
                     .ci/run does. !!!!!!!!\n"
                );
                let _ = std::fs::remove_dir_all(&dir);
                return None;
            }
            Err(error) => panic!("could not start redis-server: {error}"),
        };
        let server = RedisServer { child, port, dir };
        server.wait_until_it_answers();
        Some(server)
    }

    /// `redis-server` on 127.0.0.1:`port`, persistence off, in `dir`.
    fn spawn(port: u16, dir: &std::path::Path) -> std::io::Result<Child> {
        let mut command = Command::new("redis-server");
        command
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args(["--save", "", "--appendonly", "no"]);
        if major_version().is_some_and(|major| major >= 7) {
            // Redis 7 refuses DEBUG unless told (a live run's `hang` is DEBUG SLEEP); the
            // option does not exist before 7, where DEBUG is always allowed.
            command.args(["--enable-debug-command", "local"]);
        }
        command
            .arg("--dir")
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
    }

    /// Sends the server `signal` (`STOP`, `CONT`) with the system's `kill`.
    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("the system's kill command");
        assert!(status.success(), "kill -{signal} {}", self.child.id());
    }

    /// Stops the server's process (SIGSTOP): connections stay open, nothing is answered.
    pub fn freeze(&self) {
        self.signal("STOP");
    }

    /// Lets a frozen server's process go on (SIGCONT).
    pub fn thaw(&self) {
        self.signal("CONT");
    }

    /// Kills the server's process (SIGKILL) and waits for it: connections are dropped, new
    /// ones refused.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the server again on the same port (after [`RedisServer::kill`]), empty, as a
    /// restarted one without persistence is; waits until it answers.
    pub fn restart(&mut self) {
        self.kill();
        self.child = Self::spawn(self.port, &self.dir).expect("redis-server starts again");
        self.wait_until_it_answers();
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:port`.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn wait_until_it_answers(&self) {
        let deadline = Instant::now() + START_WAIT_MAX;
        // Bounded by the deadline: one try every 10 ms.
        while Instant::now() < deadline {
            if ping(self.port) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!(
            "redis-server on port {} did not answer PING within {START_WAIT_MAX:?}",
            self.port
        );
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The major version of the installed `redis-server` (`Redis server v=7.0.15 ...`), if it
/// runs and says.
fn major_version() -> Option<u32> {
    let output = Command::new("redis-server")
        .arg("--version")
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    let version = text.split("v=").nth(1)?;
    version.split('.').next()?.parse().ok()
}

/// Whether a server on 127.0.0.1:`port` answers PING within 200 ms.
fn ping(port: u16) -> bool {
    let address = SocketAddr::from((LOOPBACK, port));
    let Ok(mut stream) = StdStream::connect_timeout(&address, Duration::from_millis(200)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let mut reply = [0u8; 7];
    stream.write_all(b"PING\r\n").is_ok()
        && stream.read_exact(&mut reply).is_ok()
        && &reply == b"+PONG\r\n"
}

/// A loopback port free at the moment of asking (the OS picks it).
pub fn free_port() -> u16 {
    StdListener::bind((LOOPBACK, 0))
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}
