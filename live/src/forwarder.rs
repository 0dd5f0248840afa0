//! A TCP forwarder on 127.0.0.1 in front of a Redis server (seed 001's rig): taking it down
//! closes its listening socket (new connects are refused) and every connection through it (the
//! client sees its connection drop; the server sees its client go); bringing it back listens on
//! the same port again. A live run puts one in front of each connection of a file whose faults
//! cut the network (`stop`, `disconnect`); seed 001's tests take one down by hand.
//!
//! Bounds: it binds 127.0.0.1 only; each connection through it is one task that ends when
//! either side closes, and taking the forwarder down (or dropping it) aborts them all; a
//! failed accept is retried after [`ACCEPT_RETRY`], never in a tight loop.

use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

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
}

impl Forwarder {
    /// A forwarder to `target` (`host:port`) that is up, on a port the OS picks. Needs a tokio
    /// runtime.
    pub async fn start(target: impl Into<String>) -> std::io::Result<Forwarder> {
        let listener = TcpListener::bind((LOOPBACK, 0)).await?;
        let port = listener.local_addr()?.port();
        let target = target.into();
        let links = Arc::new(Mutex::new(JoinSet::new()));
        let running = tokio::spawn(forward(listener, target.clone(), Arc::clone(&links)));
        Ok(Forwarder {
            port,
            target,
            running: Mutex::new(Some(running)),
            links,
        })
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
async fn forward(listener: TcpListener, target: String, links: Arc<Mutex<JoinSet<()>>>) {
    loop {
        let Ok((mut inbound, _)) = listener.accept().await else {
            tokio::time::sleep(ACCEPT_RETRY).await;
            continue;
        };
        let _ = inbound.set_nodelay(true);
        let target = target.clone();
        let mut links = links.lock().expect("not poisoned");
        // Reap finished connections so the set holds only live ones.
        while links.try_join_next().is_some() {}
        links.spawn(async move {
            if let Ok(mut outbound) = TcpStream::connect(target.as_str()).await {
                let _ = outbound.set_nodelay(true);
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

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
}
