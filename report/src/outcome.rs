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
}

impl Outcome {
    pub const ALL: [Outcome; 10] = [
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
            Outcome::Timeout
            | Outcome::Refused
            | Outcome::ConnectionLost
            | Outcome::ServerError
            | Outcome::LockBusy => 500,
        }
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
}
