//! How a request (or a step of one) ends.

use std::fmt;

/// The end of a request: success, or the kind of error that ended it.
///
/// Every request ends in exactly one outcome. The names are the keys used in reports,
/// expectations and breaker classifiers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Outcome {
    Ok,
    /// A client-side timeout fired before the reply came.
    Timeout,
    /// The connection was refused, or not writable with the offline queue off.
    Refused,
    /// The connection was lost with the command outstanding, and it was not retried.
    ConnectionLost,
    /// A circuit breaker rejected the call before any I/O.
    BreakerOpen,
    /// A queue was full: a bulkhead's, or a Redis connection's pending commands.
    Shed,
    /// The server answered with an error.
    ServerError,
    /// A lock (`SET NX`) was held by someone else.
    LockBusy,
    /// A rate limiter said no (or could not reach its store and fails closed).
    RateLimited,
    /// A distributed lock stayed taken until its acquire timeout (seed 000's `ELOCKTIMEOUT`,
    /// which the service answers with 503).
    LockTimeout,
    /// `OOM command not allowed when used memory > 'maxmemory'`: a command that may grow
    /// memory, refused by a server over its limit that could not evict enough.
    Oom,
    /// `READONLY You can't write against a read only replica`: the server was demoted.
    ReadOnly,
    /// `LOADING Redis is loading the dataset in memory`: a restarting server.
    Loading,
    /// `WRONGTYPE Operation against a key holding the wrong kind of value`.
    WrongType,
    /// The caller gave up and the service heard it (a closed connection, a cancelled
    /// context): the request stopped before its next step. nginx logs this as 499.
    Cancelled,
}

impl Outcome {
    /// New kinds go at the end, so the columns of a series CSV keep their places.
    pub const ALL: [Outcome; 15] = [
        Outcome::Ok,
        Outcome::Timeout,
        Outcome::Refused,
        Outcome::ConnectionLost,
        Outcome::BreakerOpen,
        Outcome::Shed,
        Outcome::ServerError,
        Outcome::LockBusy,
        Outcome::RateLimited,
        Outcome::LockTimeout,
        Outcome::Oom,
        Outcome::ReadOnly,
        Outcome::Loading,
        Outcome::WrongType,
        Outcome::Cancelled,
    ];

    /// Number of outcomes; `outcome.index()` is below it.
    pub const COUNT: usize = Self::ALL.len();

    pub const fn index(self) -> usize {
        self as usize
    }

    pub const fn name(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Timeout => "timeout",
            Outcome::Refused => "refused",
            Outcome::ConnectionLost => "connection_lost",
            Outcome::BreakerOpen => "breaker_open",
            Outcome::Shed => "shed",
            Outcome::ServerError => "server_error",
            Outcome::LockBusy => "lock_busy",
            Outcome::RateLimited => "rate_limited",
            Outcome::LockTimeout => "lock_timeout",
            Outcome::Oom => "oom",
            Outcome::ReadOnly => "readonly",
            Outcome::Loading => "loading",
            Outcome::WrongType => "wrongtype",
            Outcome::Cancelled => "cancelled",
        }
    }

    pub fn from_name(name: &str) -> Option<Outcome> {
        Self::ALL.into_iter().find(|outcome| outcome.name() == name)
    }

    pub fn is_error(self) -> bool {
        self != Outcome::Ok
    }

    /// The HTTP status a service answers with when a request ends this way, unless the
    /// scenario's `[http] status` table says otherwise: 200 for ok, 429 for a rate limit, 503
    /// for a refusal before the work (an open breaker, a full queue, a lock not acquired in
    /// time: seed 000's `ELOCKTIMEOUT`), 500 for any other error.
    pub const fn default_http_status(self) -> u16 {
        match self {
            Outcome::Ok => 200,
            Outcome::RateLimited => 429,
            Outcome::BreakerOpen | Outcome::Shed | Outcome::LockTimeout => 503,
            Outcome::Cancelled => 499,
            Outcome::Timeout
            | Outcome::Refused
            | Outcome::ConnectionLost
            | Outcome::ServerError
            | Outcome::LockBusy
            | Outcome::Oom
            | Outcome::ReadOnly
            | Outcome::Loading
            | Outcome::WrongType => 500,
        }
    }

    /// Whether the server answered with an error reply (the generic `server_error` or one of
    /// the kinds Redis names): the command reached a working server, which refused it.
    pub fn is_server_error(self) -> bool {
        matches!(
            self,
            Outcome::ServerError
                | Outcome::Oom
                | Outcome::ReadOnly
                | Outcome::Loading
                | Outcome::WrongType
        )
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_indices_follow_the_list() {
        for (index, outcome) in Outcome::ALL.into_iter().enumerate() {
            assert_eq!(outcome.index(), index);
            assert_eq!(Outcome::from_name(outcome.name()), Some(outcome));
        }
        assert_eq!(Outcome::from_name("nope"), None);
    }

    #[test]
    fn the_error_replies_are_server_errors_and_nothing_else_is() {
        let server_errors: Vec<&str> = Outcome::ALL
            .into_iter()
            .filter(|outcome| outcome.is_server_error())
            .map(Outcome::name)
            .collect();
        assert_eq!(
            server_errors,
            ["server_error", "oom", "readonly", "loading", "wrongtype"]
        );
    }
}
