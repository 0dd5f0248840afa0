//! A live run from start to end: setting it up, running it to its end (or its
//! interruption) and writing its report ([`drive`]), and watching the server answer while it
//! runs ([`watch_server`]).

#[allow(unused_imports)]
use super::*;

/// Sets the run up, runs it to its end (or its interruption), and writes its report.
#[allow(clippy::too_many_arguments)]
pub(super) async fn drive(
    scenario: &Scenario,
    name: &str,
    sweep_x: Option<f64>,
    options: &Options,
    admin: &Arc<Admin>,
    notes: &mut Vec<String>,
    events: &Events,
    interrupt: &Interrupt,
) -> Result<Ran, LiveError> {
    let forwarders = Arc::new(
        forwarders(scenario, &options.address)
            .await
            .map_err(|error| redis_error("starting the forwarders")(RedisError::from(error)))?,
    );
    let (clock, connections) = open_connections(scenario, options, &forwarders).await?;
    let value_bytes = (scenario.flows.iter().flat_map(|flow| &flow.steps))
        .filter_map(|step| match step.action {
            StepAction::Redis { command, .. } => Some(command.request_bytes()),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let seed = scenario.seed;
    let run = Arc::new(Run {
        scenario: scenario.clone(),
        clock,
        recorder: Mutex::new(Recorder::new(scenario)),
        connections,
        layers: Layers::new(scenario, clock),
        caches: (scenario.caches.iter())
            .map(|spec| LiveCache::with_clock(spec.config, clock))
            .collect(),
        shared_databases: (scenario.databases.iter())
            .map(|spec| {
                spec.capacity
                    .map(|capacity| SharedDatabase::new(capacity, clock))
            })
            .collect(),
        database_streams: (scenario.databases.iter())
            .map(|spec| Mutex::new(Stream::derive(seed, "database", &spec.name)))
            .collect(),
        work_streams: (scenario.flows.iter())
            .map(|flow| Mutex::new(Stream::derive(seed, "work", &flow.name)))
            .collect(),
        call_streams: (scenario.flows.iter())
            .map(|flow| Mutex::new(Stream::derive(seed, "call", &flow.name)))
            .collect(),
        value: vec![b'x'; value_bytes as usize],
        tasks: Mutex::new(JoinSet::new()),
        done: Notify::new(),
        timing: Mutex::new(RunnerTiming::default()),
        name: name.to_owned(),
        events: events.clone(),
        watch: Mutex::new(ServerWatch::new()),
        fault_failed: AtomicBool::new(false),
        restarted: AtomicBool::new(false),
        pending_faults: Mutex::new(Vec::new()),
    });

    let file_horizon = scenario.limits.horizon;
    let cap = options
        .horizon_cap
        .map(|cap| SimTime::ZERO.saturating_add(cap));
    let horizon = match (file_horizon, cap) {
        (Some(horizon), Some(cap)) => Some(horizon.min(cap)),
        (horizon, cap) => horizon.or(cap),
    };
    let end_at = horizon.unwrap_or(SimTime::ZERO.saturating_add(LENGTH_WITHOUT_HORIZON));
    admin.set_deadline(clock.instant_at(end_at) + GRACE);

    let windows = Arc::new(Mutex::new(Vec::new()));
    let fault_notes = Arc::new(Mutex::new(Vec::new()));
    for (index, fault) in scenario.faults.iter().enumerate() {
        if fault.at >= end_at {
            continue;
        }
        let (run, admin, fault) = (Arc::clone(&run), Arc::clone(admin), fault.clone());
        let (windows, notes) = (Arc::clone(&windows), Arc::clone(&fault_notes));
        let target = scenario.target_name(fault.target).to_owned();
        let forwarders = Arc::clone(&forwarders);
        run.clone().spawn(async move {
            run.wake_at(fault.at).await;
            let start = run.now();
            let rest = end_at.saturating_since(start);
            // Its window is the report's from the instant it starts: an injection that lasts
            // the fault (a DEBUG SLEEP, a cut network) may be aborted by the run's end.
            let ms = |t: SimTime| t.as_nanos() as f64 / 1e6;
            locked(&windows).push((
                index,
                FaultWindow {
                    name: fault.name.clone(),
                    target,
                    kind: fault.kind.name().to_owned(),
                    start_ms: ms(start),
                    end_ms: fault.duration.map(|d| ms(start.saturating_add(d))),
                },
            ));
            // A cut's error is its end's (the stopped server's restart): the cut itself is
            // local to the forwarders.
            let (injected, failing) = if cuts_network(&fault) {
                let cut = cut_network(&run, &forwarders, &admin, &fault).await;
                (cut, (EventKind::FaultNotUndone, "undone"))
            } else if is_toxic(&fault) {
                toxify(&run, &forwarders, &fault).await;
                (Ok(None), (EventKind::FaultNotUndone, "undone"))
            } else {
                // Pending until answered: one the run's end cuts short was not injected.
                let instant = !matches!(fault.kind, FaultKind::Hang);
                if instant {
                    locked(&run.pending_faults).push(index);
                }
                let injected = admin.inject(&fault, rest).await;
                locked(&run.pending_faults).retain(|&pending| pending != index);
                (injected, (EventKind::FaultNotInjected, "injected"))
            };
            match injected {
                Ok(note) => locked(&notes).extend(note),
                Err(error) => {
                    run.fault_failed.store(true, Ordering::SeqCst);
                    let (kind, what) = failing;
                    run.event(
                        kind,
                        format!(
                            "faults.{} ({}) could not be {what}: {error}",
                            fault.name,
                            fault.kind.name()
                        ),
                    );
                }
            }
        });
    }
    for (index, shared) in run.shared_databases.iter().enumerate() {
        if shared.is_some() {
            let driving = Arc::clone(&run);
            run.spawn(async move {
                if let Some(shared) = &driving.shared_databases[index] {
                    shared.drive().await;
                }
            });
        }
    }
    for load in &scenario.loads {
        start_load(&run, load);
    }
    if !scenario.servers.is_empty() {
        let (task_run, admin) = (Arc::clone(&run), Arc::clone(admin));
        run.spawn(sample_server(task_run, admin));
    }
    {
        let (task_run, admin) = (Arc::clone(&run), Arc::clone(admin));
        run.spawn(watch_server(task_run, admin));
    }

    let measured = async {
        tokio::time::sleep_until(clock.start()).await;
        if horizon.is_some() {
            // With a horizon the run goes on to it (late replies and background work
            // included), as a simulated one does.
            tokio::time::sleep_until(clock.instant_at(end_at)).await;
            false
        } else {
            let all_ended = async {
                // Bounded: each wake-up is a request or a load ending, and the check is made
                // again after it.
                while !run.recorder().is_done() {
                    run.done.notified().await;
                }
            };
            tokio::time::timeout_at(clock.instant_at(end_at), all_ended)
                .await
                .is_ok()
        }
    };
    let (completed, interrupted) = tokio::select! {
        biased;
        () = interrupt.triggered() => (false, true),
        completed = measured => (completed, false),
    };
    let ended_at = if completed || interrupted {
        run.now().min(end_at)
    } else {
        end_at
    };
    // The teardown's grace runs from the measured time's end, however it came.
    admin.set_deadline(clock.instant_at(ended_at) + GRACE);
    if interrupted {
        run.event(
            EventKind::Interrupted,
            "interrupted (SIGINT): the report is of the time measured".to_owned(),
        );
    }
    // Aborts every task; one that spawned another while being aborted (on another worker
    // thread) left it in the fresh set, so this is repeated until the set stays empty, which
    // takes at most a few rounds because an aborted task spawns nothing after its abort.
    loop {
        let mut tasks = std::mem::take(&mut *locked(&run.tasks));
        if tasks.is_empty() {
            break;
        }
        tasks.shutdown().await;
    }

    notes.extend(locked(&fault_notes).drain(..));
    let pending = std::mem::take(&mut *locked(&run.pending_faults));
    for index in pending {
        let fault = &scenario.faults[index];
        run.fault_failed.store(true, Ordering::SeqCst);
        run.event(
            EventKind::FaultNotInjected,
            format!(
                "faults.{} ({}) could not be injected: the server had not answered its command \
                 when the run ended",
                fault.name,
                fault.kind.name()
            ),
        );
    }
    if let Some(late) = locked(&run.timing).late_summary() {
        notes.push(format!(
            "{name}: {late}: the runner's one loop was busy (building or writing a burst, as a \
             real client's is) or the machine was, and a late runner sends what was due as a \
             burst (the report's `runner` has the figures)"
        ));
    }
    // The run's last reading of the server, within the deadline: whether it answers now is
    // the verdict's (and, said once, an event if that is news).
    let read_at = run.now();
    let (servers, at_end) = match admin.server_summary().await {
        Ok(servers) => {
            run.probed(read_at, Ok(()));
            (servers, Health::Answering)
        }
        Err(error) => {
            let how = silence_of(&error).unwrap_or(survive::Silence::Stalled);
            run.probed(read_at, Err(how));
            (
                outagelab_report::ServerSummary::default(),
                locked(&run.watch).health(),
            )
        }
    };
    // In the file's order, as a simulated report lists them.
    let mut faults = std::mem::take(&mut *locked(&windows));
    faults.sort_by_key(|(index, _)| *index);
    let faults = faults.into_iter().map(|(_, window)| window).collect();
    let measured = if completed {
        Verdict::Completed
    } else {
        Verdict::Horizon
    };
    let flag = |flag: &AtomicBool| flag.load(Ordering::SeqCst);
    let befell = survive::Befell {
        interrupted,
        silent_at_end: match at_end {
            Health::Answering => None,
            Health::Silent { how, .. } => Some(how),
        },
        restarted: flag(&run.restarted),
        fault_failed: flag(&run.fault_failed),
    };
    let verdict = survive::verdict(measured, befell);
    Ok(Ran {
        report: report(&run, name, sweep_x, verdict, ended_at, faults, servers),
        server_answers: at_end == Health::Answering,
        clock,
    })
}

/// Asks the server every [`survive::PROBE_EVERY`] whether it answers (a `PING` on the admin
/// connection, unanswered after [`survive::STALL_AFTER`]), and says when that changes; not
/// while the file's own fault holds it ([`survive::held_by_file`]). A server found again on
/// another process (a restart) gets the file's settings again, as a restarted one starts
/// with them. Bounded by the run's end, which aborts it.
async fn watch_server(run: Arc<Run>, admin: Arc<Admin>) {
    tokio::time::sleep_until(run.clock.start()).await;
    loop {
        tokio::time::sleep(survive::PROBE_EVERY).await;
        let sent = run.now();
        if survive::held_by_file(&run.scenario.faults, sent).is_some() {
            continue;
        }
        let found = admin.ping(survive::STALL_AFTER).await;
        // An error reply is an answer.
        let silence = found.as_ref().err().and_then(silence_of);
        run.probed(sent, silence.map_or(Ok(()), Err));
        if found.is_ok() && admin.take_reconnected() && admin.restarted().await.unwrap_or(false) {
            run.restarted.store(true, Ordering::SeqCst);
            let settings = admin.apply_settings(&run.scenario).await;
            run.event(
                EventKind::ServerRestarted,
                match settings {
                    Ok(()) => "the server restarted (another run_id): its keys are gone; the \
                               file's settings are set on it again"
                        .to_owned(),
                    Err(error) => format!(
                        "the server restarted (another run_id): its keys are gone, and the \
                         file's settings could not be set again: {error}"
                    ),
                },
            );
        }
    }
}
