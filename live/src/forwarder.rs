//! A TCP forwarder on 127.0.0.1 in front of a Redis server (seed 001's rig): taking it down
//! closes its listening socket (new connects are refused) and every connection through it (the
//! client sees its connection drop; the server sees its client go); bringing it back listens on
//! the same port again. A live run puts one in front of each connection of a file whose faults
//! cut the network (`stop`, `disconnect`) or are toxics (`latency`, `bandwidth`); seed 001's
//! tests take one down by hand.
//!
//! Toxics (a file's `latency` and `bandwidth` faults on a connection) act here too:
//! [`Forwarder::set_toxics`] makes each chunk read from either side wait its added delay
//! (drawn within the jitter) before it is written on, never overtaking the chunk before it,
//! and a bandwidth limit paces what is written, as the simulator's pipes do with
//! [`Toxics`]. A chunk is what one read returned, not one command: a real stream's.
//!
//! A toxic ends when its fault ends, whatever is queued then, as the simulator's timeline
//! has it (`sim/src/redis/pipe.rs`): the writing side paces each chunk by the bandwidth in
//! force while it is on the wire, so what is still to send when a `bandwidth` fault ends goes
//! at full speed; a chunk a delay holds is let go when the toxics in force change to ones
//! that delay nothing; a close a `slow_close` holds is let go when it ends. Each change wakes
//! the links' writers ([`ToxicState::changed`]); nothing is timed when a chunk is read.
//!
//! Bounds: it binds 127.0.0.1 only; each connection through it is one task that ends when
//! either side closes, and taking the forwarder down (or dropping it) aborts them all; a
//! failed accept is retried after [`ACCEPT_RETRY`], never in a tight loop; each direction
//! holds at most [`CHUNKS_HELD`] chunks waiting for their delay (reading waits beyond).

use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use outagelab_sim::Stream;
use outagelab_sim::rules::{ToxicFaults, Toxics};
use outagelab_sim::scenario::FaultKind;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

/// Chunks one direction holds while they wait out a toxic's delay.
const CHUNKS_HELD: usize = 1024;

/// The toxics in force and the draws of their jitter, shared by the forwarder's links.
struct ToxicState {
    toxics: Toxics,
    draws: Stream,
    /// The faults whose toxics are in force.
    faults: ToxicFaults,
    /// Told of every change of `toxics`: a writer waiting out a delay or a chunk's time on
    /// the wire looks again at what is in force.
    changed: watch::Sender<()>,
}

impl ToxicState {
    fn set(&mut self, toxics: Toxics) {
        self.toxics = toxics;
        self.changed.send_replace(());
    }
}

type SharedToxics = Arc<Mutex<ToxicState>>;

const LOOPBACK: Ipv4Addr = Ipv4Addr::LOCALHOST;

/// A forwarder 127.0.0.1:`port` -> `target`. Up after [`Forwarder::start`]; [`Forwarder::down`]
/// and [`Forwarder::up`] take a shared reference, so the tasks of a run can share one.
pub struct Forwarder {
    port: u16,
    target: String,
    /// The accepting task while it is up (`None` while down).
    running: Mutex<Option<JoinHandle<()>>>,
    /// The connections through it, each a task; taken down with it.
    links: Arc<Mutex<JoinSet<()>>>,
    /// What its links do to the bytes they carry.
    toxics: SharedToxics,
}

impl Forwarder {
    /// A forwarder to `target` (`host:port`) that is up, on a port the OS picks. Needs a tokio
    /// runtime.
    pub async fn start(target: impl Into<String>) -> std::io::Result<Forwarder> {
        Self::start_with_draws(target, Stream::derive(0, "toxic jitter", "forwarder")).await
    }

    /// [`Forwarder::start`], drawing its toxics' jitter from `draws`.
    pub async fn start_with_draws(
        target: impl Into<String>,
        draws: Stream,
    ) -> std::io::Result<Forwarder> {
        let listener = TcpListener::bind((LOOPBACK, 0)).await?;
        let port = listener.local_addr()?.port();
        let target = target.into();
        let links = Arc::new(Mutex::new(JoinSet::new()));
        let toxics = Arc::new(Mutex::new(ToxicState {
            toxics: Toxics::default(),
            draws,
            faults: ToxicFaults::default(),
            changed: watch::Sender::new(()),
        }));
        let running = tokio::spawn(forward(
            listener,
            target.clone(),
            Arc::clone(&links),
            Arc::clone(&toxics),
        ));
        Ok(Forwarder {
            port,
            target,
            running: Mutex::new(Some(running)),
            links,
            toxics,
        })
    }

    /// From now, what its links carry takes `toxics`: what is on the wire goes on at its
    /// bandwidth from now, and what a delay holds is let go at once if `toxics` delay nothing
    /// (else it keeps the delay it drew).
    pub fn set_toxics(&self, toxics: Toxics) {
        self.toxics.lock().expect("not poisoned").set(toxics);
    }

    /// A `latency` or `bandwidth` fault starts (`on`) or ends: what its links do from now is
    /// what the faults in force add up to ([`Toxics::of`], the simulator's rule), as
    /// [`Forwarder::set_toxics`] says.
    pub fn toxic_fault(&self, kind: FaultKind, on: bool) {
        let mut state = self.toxics.lock().expect("not poisoned");
        let toxics = state.faults.apply(kind, on);
        state.set(toxics);
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:port`, where clients connect.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Refuses new connections and drops every connection through it, both done when it
    /// returns; nothing when it is already down.
    pub async fn down(&self) {
        let running = self.running.lock().expect("not poisoned").take();
        if let Some(running) = running {
            running.abort();
            let _ = running.await;
        }
        let mut links = std::mem::take(&mut *self.links.lock().expect("not poisoned"));
        // Aborts each connection's task and waits for it to end, its sockets closed.
        links.shutdown().await;
    }

    /// Listens again on the same port; nothing when it is already up. An error when the port
    /// was taken meanwhile.
    pub async fn up(&self) -> std::io::Result<()> {
        if self.running.lock().expect("not poisoned").is_some() {
            return Ok(());
        }
        let listener = TcpListener::bind((LOOPBACK, self.port)).await?;
        let running = tokio::spawn(forward(
            listener,
            self.target.clone(),
            Arc::clone(&self.links),
            Arc::clone(&self.toxics),
        ));
        *self.running.lock().expect("not poisoned") = Some(running);
        Ok(())
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        if let Some(running) = self.running.lock().expect("not poisoned").take() {
            running.abort();
        }
        // Dropping the set aborts each connection's task.
        drop(std::mem::take(
            &mut *self.links.lock().expect("not poisoned"),
        ));
    }
}

/// A failed accept (out of file descriptors, say) is tried again after this, not at once.
const ACCEPT_RETRY: Duration = Duration::from_millis(10);

/// Accepts and forwards until aborted, each connection a task in `links`.
async fn forward(
    listener: TcpListener,
    target: String,
    links: Arc<Mutex<JoinSet<()>>>,
    toxics: SharedToxics,
) {
    loop {
        let Ok((inbound, _)) = listener.accept().await else {
            tokio::time::sleep(ACCEPT_RETRY).await;
            continue;
        };
        let _ = inbound.set_nodelay(true);
        let target = target.clone();
        let toxics = Arc::clone(&toxics);
        let mut links = links.lock().expect("not poisoned");
        // Reap finished connections so the set holds only live ones.
        while links.try_join_next().is_some() {}
        links.spawn(async move {
            if let Ok(outbound) = TcpStream::connect(target.as_str()).await {
                let _ = outbound.set_nodelay(true);
                let (from_client, to_client) = inbound.into_split();
                let (from_server, to_server) = outbound.into_split();
                tokio::join!(
                    pump(from_client, to_server, Arc::clone(&toxics)),
                    pump(from_server, to_client, toxics),
                );
            }
        });
    }
}

/// One direction of a link, as the simulator's pipe: a chunk read now is on the wire from
/// when the chunk before it is off it, for its bytes at the bandwidth in force meanwhile (a
/// change of it re-times what is left), then takes its delay (drawn from the toxics in force
/// when it was read; let go early when the toxics change to ones that delay nothing), and is
/// written on then, never before the chunk before it; the end of the stream is passed on
/// after the last chunk, a `slow_close`'s delay later (or when the toxics change to no
/// `slow_close`). Ends when either side closes or fails.
async fn pump(
    mut from: impl tokio::io::AsyncRead + Unpin,
    mut to: impl tokio::io::AsyncWrite + Unpin,
    toxics: SharedToxics,
) {
    let (held, mut due) = mpsc::channel::<(Instant, Duration, Vec<u8>)>(CHUNKS_HELD);
    let drawing = Arc::clone(&toxics);
    let reading = async move {
        let mut buffer = vec![0u8; 64 * 1024];
        // Bounded by the stream: it ends at its end or error.
        while let Ok(read) = from.read(&mut buffer).await {
            if read == 0 {
                break;
            }
            let delay = {
                let mut state = drawing.lock().expect("not poisoned");
                let ToxicState { toxics, draws, .. } = &mut *state;
                toxics.draw_delay(draws)
            };
            let delay = Duration::from_nanos(delay.as_nanos());
            if held
                .send((Instant::now(), delay, buffer[..read].to_vec()))
                .await
                .is_err()
            {
                break;
            }
        }
    };
    let mut changed = toxics.lock().expect("not poisoned").changed.subscribe();
    let in_force = move || toxics.lock().expect("not poisoned").toxics;
    let writing = async move {
        // When the wire is free of what was written before, and the latest instant a chunk
        // was let go (nothing goes before it).
        let (mut wire_free, mut last_out) = (Instant::now(), Instant::now());
        while let Some((read_at, delay, chunk)) = due.recv().await {
            wire_free = on_the_wire(
                wire_free.max(read_at),
                chunk.len() as u64,
                &mut changed,
                &in_force,
            )
            .await;
            let mut at = (wire_free + delay).max(last_out);
            // Held for its delay, unless the toxics change to ones that delay nothing.
            // Bounded: each turn waits for the instant or for a change.
            while Instant::now() < at {
                changed.mark_unchanged();
                if delays_nothing(&in_force()) {
                    at = Instant::now().max(last_out);
                    break;
                }
                tokio::select! {
                    () = tokio::time::sleep_until(at) => {}
                    moved = changed.changed() => if moved.is_err() { break },
                }
            }
            last_out = at;
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
        // A `slow_close` holds the end of the stream back, until it ends. Bounded as above.
        let closing_at = Instant::now() + Duration::from_nanos(in_force().close_delay.as_nanos());
        loop {
            changed.mark_unchanged();
            if in_force().close_delay.is_zero() {
                break;
            }
            tokio::select! {
                () = tokio::time::sleep_until(closing_at) => break,
                moved = changed.changed() => if moved.is_err() { break },
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(reading, writing);
}

/// The toxics add no delay to a chunk: no latency, no jitter, no loss.
fn delays_nothing(toxics: &Toxics) -> bool {
    toxics.added.is_zero() && toxics.jitter.is_zero() && toxics.loss_ppm == 0
}

/// When `bytes` that start leaving at `start` are all sent, at the bandwidth in force in each
/// stretch between changes of the toxics, as the simulator's `Pipe::sent_by` reads its
/// timeline: what is left when a `bandwidth` fault ends goes at full speed. Waits until then.
/// Bounded: one turn per change of the toxics while the bytes are on the wire.
async fn on_the_wire(
    start: Instant,
    bytes: u64,
    changed: &mut watch::Receiver<()>,
    in_force: &impl Fn() -> Toxics,
) -> Instant {
    let (mut at, mut left) = (start, bytes);
    loop {
        changed.mark_unchanged();
        let Some(rate) = in_force().bandwidth else {
            return at;
        };
        let done = at + Duration::from_nanos(rate.time_for(left).as_nanos());
        tokio::select! {
            () = tokio::time::sleep_until(done) => return done,
            moved = changed.changed() => {
                if moved.is_err() {
                    return done;
                }
                // What went at this rate until now, whole bytes; the rest at what is in force.
                let now = Instant::now().max(at);
                let nanos = now.duration_since(at).as_nanos();
                let sent = nanos * u128::from(rate.bytes_per_second()) / 1_000_000_000;
                left = left.saturating_sub(u64::try_from(sent).unwrap_or(u64::MAX));
                at = now;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use outagelab_model::time::SimDuration;

    /// An echo server on loopback: what the forwarder carries comes back.
    async fn echo() -> u16 {
        let listener = TcpListener::bind((LOOPBACK, 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            // Bounded by the test: the runtime ends with it.
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buffer = [0u8; 64];
                    while let Ok(read) = stream.read(&mut buffer).await {
                        if read == 0 || stream.write_all(&buffer[..read]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        port
    }

    #[tokio::test]
    async fn down_refuses_and_drops_and_up_carries_again() {
        let forwarder = Forwarder::start(format!("127.0.0.1:{}", echo().await))
            .await
            .unwrap();
        let mut through = TcpStream::connect(forwarder.address()).await.unwrap();
        through.write_all(b"ping").await.unwrap();
        let mut reply = [0u8; 4];
        through.read_exact(&mut reply).await.unwrap();
        assert_eq!(&reply, b"ping");

        forwarder.down().await;
        // The open connection is dropped: it reads the end, or a reset.
        let mut rest = [0u8; 4];
        assert!(matches!(through.read(&mut rest).await, Ok(0) | Err(_)));
        // And a new one is refused.
        assert!(TcpStream::connect(forwarder.address()).await.is_err());
        forwarder.down().await; // already down: nothing

        forwarder.up().await.unwrap();
        forwarder.up().await.unwrap(); // already up: nothing
        let mut again = TcpStream::connect(forwarder.address()).await.unwrap();
        again.write_all(b"pong").await.unwrap();
        again.read_exact(&mut reply).await.unwrap();
        assert_eq!(&reply, b"pong");
    }

    /// The round trip through a forwarder with 40 ms added each way: at least 80 ms (a busy
    /// machine only adds), and back to fast once the toxic is lifted.
    #[tokio::test]
    async fn a_latency_toxic_delays_both_directions_until_it_is_lifted() {
        let forwarder = Forwarder::start(format!("127.0.0.1:{}", echo().await))
            .await
            .unwrap();
        let mut through = TcpStream::connect(forwarder.address()).await.unwrap();
        forwarder.set_toxics(Toxics {
            added: SimDuration::from_millis(40),
            ..Toxics::default()
        });
        let mut reply = [0u8; 4];
        let sent = Instant::now();
        through.write_all(b"ping").await.unwrap();
        through.read_exact(&mut reply).await.unwrap();
        assert_eq!(&reply, b"ping");
        let slow = sent.elapsed();
        assert!(slow >= Duration::from_millis(80), "{slow:?}");
        forwarder.set_toxics(Toxics::default());
        let sent = Instant::now();
        through.write_all(b"pong").await.unwrap();
        through.read_exact(&mut reply).await.unwrap();
        assert!(sent.elapsed() < slow, "faster without it");
    }

    /// Packet loss at a forwarder: each chunk is held for its retransmissions, drawn by the
    /// simulator's rule from the forwarder's stream. A test stream of the same seed draws the
    /// two chunks' delays (the ping's, then the echo's); the round trip is at least their sum
    /// (a busy machine only adds), and some chunk of the twenty round trips was lost at least
    /// once, with 40% loss.
    #[tokio::test]
    async fn a_packet_loss_toxic_holds_chunks_for_their_retransmissions() {
        let seed = || Stream::derive(7, "toxic jitter", "test");
        let forwarder = Forwarder::start_with_draws(format!("127.0.0.1:{}", echo().await), seed())
            .await
            .unwrap();
        let mut through = TcpStream::connect(forwarder.address()).await.unwrap();
        let loss = FaultKind::PacketLoss {
            ppm: 400_000,
            retransmit: SimDuration::from_millis(5),
        };
        forwarder.toxic_fault(loss, true);
        let expected = Toxics::of(&[loss]);
        let mut draws = seed();
        let mut lost = false;
        for _ in 0..20 {
            let ping = expected.draw_delay(&mut draws);
            let echo = expected.draw_delay(&mut draws);
            lost |= !(ping.is_zero() && echo.is_zero());
            let least = Duration::from_nanos(ping.saturating_add(echo).as_nanos());
            let mut reply = [0u8; 4];
            let sent = Instant::now();
            through.write_all(b"ping").await.unwrap();
            through.read_exact(&mut reply).await.unwrap();
            assert_eq!(&reply, b"ping");
            assert!(sent.elapsed() >= least, "{:?} < {least:?}", sent.elapsed());
        }
        assert!(lost, "40% loss over 40 chunks lost none");
    }

    /// A server that closes at once, through a forwarder with a 150 ms `slow_close`: the
    /// client hears the close at least 150 ms after it connected (a busy machine only adds).
    #[tokio::test]
    async fn a_slow_close_holds_the_end_of_the_stream_back() {
        let listener = TcpListener::bind((LOOPBACK, 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            // Accepts and drops: the close goes out at once.
            while let Ok((stream, _)) = listener.accept().await {
                drop(stream);
            }
        });
        let forwarder = Forwarder::start(format!("127.0.0.1:{port}")).await.unwrap();
        let close = FaultKind::SlowClose {
            delay: SimDuration::from_millis(150),
        };
        forwarder.toxic_fault(close, true);
        let sent = Instant::now();
        let mut through = TcpStream::connect(forwarder.address()).await.unwrap();
        let mut byte = [0u8; 1];
        let read = through.read(&mut byte).await.unwrap_or(0);
        assert_eq!(read, 0, "closed");
        let heard = sent.elapsed();
        assert!(heard >= Duration::from_millis(150), "{heard:?}");
    }

    /// A 10 s latency toxic lifted 100 ms after a ping was sent: the ping it holds is let go
    /// then, not 20 s later (a busy machine only adds, so the bound is loose).
    #[tokio::test]
    async fn a_chunk_a_latency_toxic_holds_is_let_go_when_it_ends() {
        let forwarder = Forwarder::start(format!("127.0.0.1:{}", echo().await))
            .await
            .unwrap();
        let mut through = TcpStream::connect(forwarder.address()).await.unwrap();
        let slow = FaultKind::Latency {
            added: SimDuration::from_secs(10),
            jitter: SimDuration::ZERO,
        };
        forwarder.toxic_fault(slow, true);
        let sent = Instant::now();
        through.write_all(b"ping").await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        forwarder.toxic_fault(slow, false);
        let mut reply = [0u8; 4];
        through.read_exact(&mut reply).await.unwrap();
        assert_eq!(&reply, b"ping");
        let took = sent.elapsed();
        assert!(
            (Duration::from_millis(100)..Duration::from_secs(5)).contains(&took),
            "{took:?}"
        );
    }

    /// 64 KiB through a forwarder paced at 1 MiB/s each way: at least 125 ms for the round
    /// trip (62.5 ms each way).
    #[tokio::test]
    async fn a_bandwidth_toxic_paces_what_it_carries() {
        let forwarder = Forwarder::start(format!("127.0.0.1:{}", echo().await))
            .await
            .unwrap();
        let mut through = TcpStream::connect(forwarder.address()).await.unwrap();
        let rate = outagelab_sim::scenario::ByteRate::new(1 << 20).unwrap();
        forwarder.toxic_fault(FaultKind::Bandwidth(rate), true);
        let sent = Instant::now();
        let payload = vec![7u8; 64 * 1024];
        let (mut reading, mut writing) = through.split();
        let mut back = vec![0u8; payload.len()];
        let (written, read) =
            tokio::join!(writing.write_all(&payload), reading.read_exact(&mut back));
        written.unwrap();
        read.unwrap();
        assert_eq!(back, payload);
        let took = sent.elapsed();
        assert!(took >= Duration::from_millis(125), "{took:?}");
        forwarder.toxic_fault(FaultKind::Bandwidth(rate), false);
    }
}
