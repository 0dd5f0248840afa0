//! The generator's resources: servers, client loops, connections, databases, key families,
//! policies (breakers, bulkheads, semaphores, adaptive limits, retries), caches, rate limiters,
//! KV stores, throttles, locks and callers.

use outagelab_scenario_file::declared_words;

use super::*;

impl Generator {
    pub(super) fn servers(&mut self) {
        let servers = self.names.servers.clone();
        for (name, primary) in servers {
            self.table(&format!("servers.{name}"));
            if let Some(primary) = primary {
                self.line("replica_of", &quoted(&primary));
                self.optional(50, "replication_lag", |g| g.duration(0, 50_000));
            }
            self.optional(40, "command_cost", |g| g.duration(1, 100));
            self.optional(15, "byte_rate", |g| g.bandwidth());
            self.optional(20, "persistence", |g| g.boolean());
            if self.rng.chance(40) {
                let key = self.reference(&self.names.keys.clone());
                let value = self.size(1, 4096);
                let preload = if self.rng.chance(50) {
                    let count = self.count(1, 1);
                    format!("[{{ key = {key}, count = {count}, value = {value} }}]")
                } else {
                    format!("[{{ key = {key}, value = {value} }}]")
                };
                self.line("preload", &preload);
            }
            self.optional(10, "key_bytes", |g| g.size(1, 64));
            self.optional(10, "key_overhead", |g| g.size(0, 128));
            if self.rng.chance(30) {
                let limit = self.size(0, 200_000);
                self.line("maxmemory", &limit);
                let policy = *self.rng.pick(&[
                    "noeviction",
                    "allkeys-lru",
                    "volatile-lru",
                    "allkeys-random",
                    "volatile-ttl",
                ]);
                self.line("maxmemory_policy", &quoted(policy));
                if self.rng.chance(30) {
                    let samples = self.count(1, 64);
                    self.line("maxmemory_samples", &samples);
                } else if self.rng.chance(20) {
                    self.line("maxmemory_exact", "true");
                }
            }
            self.optional(15, "hz", |g| g.count(1, 500));
        }
    }

    pub(super) fn client_loops(&mut self) {
        for name in self.names.client_loops.clone() {
            self.table(&format!("client_loops.{name}"));
            let rate = self.bandwidth();
            self.line("write_rate", &rate);
            if self.rng.chance(40) {
                let rate = self.bandwidth();
                self.line("copy_rate", &rate);
                let size = self.size(1, 65536);
                self.line("copy_before_yield", &size);
            }
        }
    }

    pub(super) fn connections(&mut self) {
        for (name, server) in self.names.connections.clone() {
            self.table(&format!("connections.{name}"));
            self.line("server", &quoted(&server));
            if self.rng.chance(10) {
                let preset = *self.rng.pick(&["ioredis", "redis-rs-multiplexed"]);
                self.line("preset", &quoted(preset));
            }
            self.optional(40, "latency", |g| g.duration(10, 2_000));
            self.optional(15, "bandwidth", |g| g.bandwidth());
            self.optional(50, "command_timeout", |g| {
                g.duration_written(
                    format!("connections.{name}.command_timeout"),
                    1_000,
                    500_000,
                )
            });
            let reconnect = *self
                .rng
                .pick(&["always", "always", "never", "slot", "manager"]);
            if reconnect != "always" || self.rng.chance(30) {
                self.line("reconnect", &quoted(reconnect));
            }
            if reconnect != "slot" {
                self.optional(20, "offline_queue", |g| g.boolean());
                if self.rng.chance(20) {
                    let retries = if self.rng.chance(20) {
                        quoted("unlimited")
                    } else {
                        self.count(0, 30)
                    };
                    self.line("max_retries", &retries);
                }
            }
            if reconnect == "manager" && self.rng.chance(50) {
                let retries = self.count(0, 10);
                self.line("reconnect_retries", &retries);
            }
            self.optional(20, "connect_timeout", |g| g.duration(1_000, 2_000_000));
            if self.rng.chance(20) {
                let delay = self.duration(1_000, 200_000);
                self.line("reconnect_delay", &delay);
                let delay_max = self.duration(200_000, 3_000_000);
                self.line("reconnect_delay_max", &delay_max);
            }
            self.optional(10, "connected_at_start", |g| g.boolean());
            if let Some(client_loop) = self.names.client_loops.first().cloned()
                && self.rng.chance(60)
            {
                self.line("client_loop", &quoted(&client_loop));
            }
            self.optional(10, "timer_lateness", |g| g.duration(0, 5_000));
            self.optional(20, "pending_max", |g| g.count(1, 50));
            self.optional(10, "follows_failover", |g| g.boolean());
            if let Some((subscriber, sub_server, _)) = self.names.subscribers.first().cloned()
                && sub_server == server
                && self.rng.chance(40)
            {
                let tracking = if self.rng.chance(50) {
                    let family = self.reference(&self.names.keys.clone());
                    format!(
                        "{{ redirect = {}, bcast = [{family}] }}",
                        quoted(&subscriber)
                    )
                } else {
                    format!("{{ redirect = {} }}", quoted(&subscriber))
                };
                self.line("tracking", &tracking);
            }
        }
        for (name, server, channel) in self.names.subscribers.clone() {
            self.table(&format!("connections.{name}"));
            self.line("server", &quoted(&server));
            let cache = self.reference(&self.names.caches.clone());
            let flush = self.boolean();
            let subscribe = match channel {
                Some(channel) => format!(
                    "{{ channel = {}, invalidates = {cache}, flush_on_reconnect = {flush} }}",
                    quoted(&channel)
                ),
                None => format!("{{ invalidates = {cache} }}"),
            };
            self.line("subscribe", &subscribe);
        }
    }

    pub(super) fn databases(&mut self) {
        for name in self.names.databases.clone() {
            self.table(&format!("databases.{name}"));
            let latency = self.latency(500, 50_000);
            self.line("latency", &latency);
            self.optional(50, "capacity", |g| g.count(1, 20));
            if self.rng.chance(30) {
                let connections = self.count(1, 20);
                self.line("max_connections", &connections);
                self.names.pooled.push(name.clone());
                self.optional(50, "connection_queue", |g| g.count(0, 20));
            }
            if self.rng.chance(15) {
                let above = self.rng.range(2, 20);
                let recover = self.rng.range(1, above - 1);
                let percent = self.percent(1, 99);
                let collapse = format!(
                    "{{ above = {above}, throughput_percent = {percent}, recover_below = {recover} }}"
                );
                self.line("collapse", &collapse);
            }
        }
    }

    pub(super) fn keys(&mut self) {
        for name in self.names.keys.clone() {
            self.table(&format!("keys.{name}"));
            let count = self.count(1, 200);
            self.line("count", &count);
            if self.rng.chance(25) {
                self.line("distribution", &quoted("hot"));
                let hot = self.count(1, 5);
                self.line("hot_keys", &hot);
                let share = self.percent(1, 99);
                self.line("hot_share_percent", &share);
            }
        }
    }

    pub(super) fn breakers(&mut self) {
        for name in self.names.breakers.clone() {
            self.table(&format!("breakers.{name}"));
            if self.rng.chance(15) {
                self.line("enabled", "false");
                self.names.breakers_toggle.push(name.clone());
            }
            let preset = self.rng.chance(20);
            if preset {
                let preset = *self.rng.pick(declared_words("breakers", "preset"));
                self.line("preset", &quoted(preset));
            }
            let rate_rule = self.rng.chance(50);
            if rate_rule {
                let percent = self.percent(1, 100);
                let window_calls = self.rng.range(1, 50);
                let min_calls = self.count(1, window_calls);
                let window = if self.rng.chance(50) {
                    format!("window_calls = {window_calls}")
                } else {
                    // Slots that divide the window into whole milliseconds.
                    let slots = self.rng.range(1, 10);
                    let window = self.rng.range(1, 500) * slots;
                    format!("window = \"{window}ms\", window_slots = {slots}")
                };
                self.line(
                    "failure_rate",
                    &format!("{{ percent = {percent}, {window}, min_calls = {min_calls} }}"),
                );
            } else if !preset || self.rng.chance(50) {
                let failures = self.count(1, 10);
                self.line("failures", &failures);
            }
            if !preset || self.rng.chance(50) {
                let open_for = self.duration(1_000, 2_000_000);
                self.line("open_for", &open_for);
            }
            self.optional(30, "half_open_probes", |g| g.count(1, 5));
            if self.rng.chance(30) {
                let mut counts = vec!["\"timeout\""];
                for outcome in [
                    "\"refused\"",
                    "\"connection_lost\"",
                    "\"server_error\"",
                    "\"oom\"",
                    "\"readonly\"",
                    "\"loading\"",
                    "\"lock_timeout\"",
                ] {
                    if self.rng.chance(40) {
                        counts.push(outcome);
                    }
                }
                self.line("counts", &format!("[{}]", counts.join(", ")));
            }
            if rate_rule && self.rng.chance(20) {
                self.line("half_open_rule", &quoted("failure_rate"));
            }
            if self.rng.chance(20) {
                let uncounted = *self.rng.pick(&["ignored", "success"]);
                self.line("uncounted_as", &quoted(uncounted));
            }
            self.optional(10, "half_open_max_wait", |g| g.duration(1_000, 1_000_000));
            if self.rng.chance(10) {
                self.line("open_for_factor", "2");
                let max = self.duration(2_000_000, 10_000_000);
                self.line("open_for_max", &max);
            }
            if rate_rule && self.rng.chance(15) {
                let slow = self.duration(1_000, 200_000);
                self.line("slow_call_duration", &slow);
                let percent = self.percent(1, 100);
                self.line("slow_call_percent", &percent);
            }
            if rate_rule && self.rng.chance(20) {
                let on = *self.rng.pick(&["any", "failure"]);
                self.line("evaluate_on", &quoted(on));
            }
            if self.rng.chance(15) {
                let late = *self.rng.pick(&["ignored", "counted"]);
                self.line("late_failures", &quoted(late));
            }
        }
    }

    pub(super) fn bulkheads(&mut self) {
        for name in self.names.bulkheads.clone() {
            self.table(&format!("bulkheads.{name}"));
            if self.rng.chance(10) {
                self.line("enabled", "false");
            }
            let max = self.count(1, 10);
            self.line("max_concurrent", &max);
            let queue = self.count(0, 20);
            self.line("queue", &queue);
        }
    }

    pub(super) fn semaphores(&mut self) {
        for name in self.names.semaphores.clone() {
            self.table(&format!("semaphores.{name}"));
            if self.rng.chance(10) {
                self.line("enabled", "false");
            }
            let both = self.rng.below(3);
            if both != 1 {
                let max = self.count(1, 10);
                self.line("max_in_flight", &max);
            }
            if both != 0 {
                let bytes = self.size(64, 100_000);
                self.line("max_bytes", &bytes);
            }
        }
    }

    pub(super) fn adaptive_limits(&mut self) {
        for name in self.names.adaptive_limits.clone() {
            self.table(&format!("adaptive_limits.{name}"));
            if self.rng.chance(10) {
                self.line("enabled", "false");
            }
            if self.rng.chance(50) {
                let min = self.rng.range(1, 5);
                let initial = self.rng.range(min, 30);
                let max = self.rng.range(initial, 100);
                self.line("limit_min", &min.to_string());
                let initial = if self.absurd() {
                    self.pick_absurd(COUNT_ABSURD)
                } else {
                    initial.to_string()
                };
                self.line("limit_initial", &initial);
                self.line("limit_max", &max.to_string());
            }
            if self.rng.chance(50) {
                let ratio = *self.rng.pick(&["0.5", "0.9", "0.99"]);
                let ratio = if self.absurd() {
                    self.pick_absurd(&["1", "0.1", "nan", "-1"])
                } else {
                    ratio.to_owned()
                };
                let timeout = self.duration(1_000, 1_000_000);
                self.line(
                    "aimd",
                    &format!("{{ backoff_ratio = {ratio}, timeout = {timeout} }}"),
                );
            } else {
                let window = self.count(1, 1000);
                let queue = self.count(1, 10);
                self.line(
                    "gradient2",
                    &format!(
                        "{{ rtt_tolerance = 1.5, smoothing = 0.2, long_window = {window}, queue_size = {queue} }}"
                    ),
                );
            }
            if self.rng.chance(20) {
                self.line("drops", "[\"timeout\", \"shed\"]");
            }
        }
    }

    pub(super) fn retries(&mut self) {
        for name in self.names.retries.clone() {
            self.table(&format!("retries.{name}"));
            if self.rng.chance(10) {
                self.line("enabled", "false");
            }
            let preset = self.rng.chance(15);
            let mut backoff_crate = false;
            if preset {
                let preset = *self
                    .rng
                    .pick(&["backoff-crate", "tokio-retry", "aws-full-jitter"]);
                self.line("preset", &quoted(preset));
                // The presets' own waits are seconds long: keep runs short.
                backoff_crate = preset == "backoff-crate";
                if backoff_crate {
                    self.line("max_attempts", "3");
                    self.line("elapsed_max", "\"2s\"");
                }
            } else {
                let attempts = self.count(1, 5);
                self.line("max_attempts", &attempts);
                let backoff_us = self.rng.range(1, 100_000);
                let backoff = if self.absurd() {
                    self.pick_absurd(DURATION_ABSURD)
                } else {
                    quoted(&duration_text(backoff_us))
                };
                self.line("backoff", &backoff);
                if self.rng.chance(40) {
                    self.line("backoff_factor", "2");
                    let max = quoted(&duration_text(backoff_us * self.rng.range(1, 20)));
                    self.line("backoff_max", &max);
                }
            }
            if self.rng.chance(30) {
                let jitter = *self.rng.pick(declared_words("retries", "jitter"));
                self.line("jitter", &quoted(jitter));
                if jitter == "proportional" && self.rng.chance(50) {
                    self.line("randomization_factor", "0.25");
                }
            }
            // (Written once: the backoff-crate preset's is above.)
            if self.rng.chance(15) && !backoff_crate {
                let elapsed = self.duration(1_000, 2_000_000);
                self.line("elapsed_max", &elapsed);
            }
            if self.rng.chance(20) {
                let percent = self.percent(1, 50);
                self.line("budget_percent", &percent);
                let min = self.count(0, 10);
                self.line("budget_min_per_second", &min);
                let window = self.duration(100_000, 10_000_000);
                self.line("budget_window", &window);
            }
            if self.rng.chance(30) {
                let retry_on = *self.rng.pick(&[
                    "[\"timeout\"]",
                    "[\"timeout\", \"refused\", \"shed\"]",
                    "[\"5xx\"]",
                    "[\"lock_busy\", \"timeout\"]",
                    "[\"rate_limited\"]",
                ]);
                self.line("retry_on", retry_on);
            }
        }
    }

    pub(super) fn caches(&mut self) {
        for name in self.names.caches.clone() {
            self.table(&format!("caches.{name}"));
            let entries = self.count(1, 100);
            self.line("max_entries", &entries);
            let bytes = self.size(64, 1_000_000);
            self.line("max_bytes", &bytes);
            let ttl = self.duration(1_000, 5_000_000);
            self.line("ttl", &ttl);
        }
    }

    pub(super) fn rate_limits(&mut self) {
        for (name, store) in self.names.rate_limits.clone() {
            self.table(&format!("rate_limits.{name}"));
            if self.rng.chance(10) {
                self.line("enabled", "false");
            }
            if self.rng.chance(30) {
                let algorithm = *self.rng.pick(declared_words("rate_limits", "algorithm"));
                self.line("algorithm", &quoted(algorithm));
            }
            let capacity = self.count(1, 50);
            self.line("capacity", &capacity);
            let rate = self.rate(1, 200);
            self.line("rate", &rate);
            if store {
                let connections = self.names.connection_names();
                let store = self.reference(&connections);
                self.line("store", &store);
                let unreachable = *self.rng.pick(&["open", "closed"]);
                self.line("when_unreachable", &quoted(unreachable));
                if unreachable == "closed" && self.rng.chance(50) {
                    let retry_after = self.duration(1_000, 2_000_000);
                    self.line("fail_closed_retry_after", &retry_after);
                }
            }
        }
    }

    pub(super) fn kv_stores(&mut self) {
        for name in self.names.kv_stores.clone() {
            self.table(&format!("kv_stores.{name}"));
            let read = self.latency(100, 20_000);
            self.line("read_latency", &read);
            let write = self.latency(100, 40_000);
            self.line("write_latency", &write);
            self.optional(30, "staleness_max", |g| g.duration(0, 100_000));
        }
    }

    pub(super) fn throttles(&mut self) {
        for name in self.names.throttles.clone() {
            self.table(&format!("throttles.{name}"));
            if self.rng.chance(10) {
                self.line("enabled", "false");
            }
            let kv = !self.names.kv_stores.is_empty() && self.rng.chance(50);
            self.line("form", &quoted(if kv { "kv" } else { "atomic" }));
            if kv {
                let store = self.reference(&self.names.kv_stores.clone());
                self.line("store", &store);
            }
            let max = self.count(1, 10);
            self.line("inflight_max", &max);
            if self.rng.chance(50) {
                // Retry-After carries whole seconds.
                let retry_after = if self.absurd() {
                    self.pick_absurd(DURATION_ABSURD)
                } else {
                    quoted(&format!("{}s", self.rng.range(1, 2)))
                };
                self.line("retry_after", &retry_after);
            }
            if self.rng.chance(30) {
                let ttl = self.duration(10_000, 5_000_000);
                self.line("counter_ttl", &ttl);
                let mode = *self.rng.pick(&["refreshed", "fixed"]);
                self.line("ttl_mode", &quoted(mode));
            }
            self.optional(20, "release_loss_percent", |g| g.percent(0, 50));
        }
    }

    pub(super) fn locks(&mut self) {
        for name in self.names.locks.clone() {
            self.table(&format!("locks.{name}"));
            let lease = self.duration(1_000, 3_000_000);
            self.line("lease", &lease);
            let timeout_us = self.rng.range(1_000, 1_000_000);
            let delay = quoted(&duration_text(self.rng.range(1, timeout_us)));
            if self.rng.chance(70) {
                self.line("retry_delay", &delay);
            }
            if self.rng.chance(30) {
                let jitter = *self.rng.pick(declared_words("locks", "retry_jitter"));
                self.line("retry_jitter", &quoted(jitter));
            }
            let timeout = if self.absurd() {
                self.pick_absurd(DURATION_ABSURD)
            } else {
                quoted(&duration_text(timeout_us))
            };
            self.line("acquire_timeout", &timeout);
        }
    }

    pub(super) fn callers(&mut self) {
        for name in self.names.callers.clone() {
            self.table(&format!("callers.{name}"));
            let timeout = self.rng.chance(70);
            if timeout {
                let timeout = self.duration(1_000, 1_000_000);
                self.line("timeout", &timeout);
            }
            if timeout && self.rng.chance(40) {
                self.line("cancel_on_timeout", "true");
            }
            if !self.names.retries.is_empty() && self.rng.chance(50) {
                // A retry policy of the caller's own: with a service, one its flows use
                // would be refused (each instance would share it).
                self.line("retry", &quoted("caller_retry"));
                self.table("retries.caller_retry");
                let attempts = self.count(1, 4);
                self.line("max_attempts", &attempts);
                let backoff = self.duration(1_000, 100_000);
                self.line("backoff", &backoff);
                self.line("retry_on", "[\"timeout\", \"5xx\"]");
            }
        }
    }
}
