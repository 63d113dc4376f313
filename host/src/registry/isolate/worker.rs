//! `memplan __plan-worker` (hidden): the child side of `memplan plan --isolate`.
//!
//! Reads a `PlanRequest` in binary form ([`super::wire`]) on stdin, loads the one plugin file it is given — after the
//! same trust checks as the host, and only if its SHA-256 is still the one the host saw —
//! runs the planner with a host context (logs to the inherited stderr, deadline from
//! `--timeout`) and writes to stdout the started line when it calls the planner, then one
//! `WorkerReply` in binary form. It exits 0 whenever it could
//! write a reply: how the run went is in the reply, and anything else (a signal, another exit
//! status, no reply) is the plugin's doing, which the host reports.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::process::ExitCode;

use memplan_plugin_api::PlanRequest;

use super::{wire, WorkerReply, STARTED_LINE};
use crate::cli::config::WorkerConfig;
use crate::error::{Error, Result};
use crate::registry::trust::OpenedPlugin;
use crate::registry::{call_planner, open_module, LoadFailure};

pub fn run(config: &WorkerConfig) -> Result<ExitCode> {
    let mut reply_out = reserve_stdout_for_the_reply()?;
    let reply = serve(config, &mut reply_out).unwrap_or_else(|error| WorkerReply::failed(&error));
    let start = std::time::Instant::now();
    let mut reply_out = BufWriter::new(reply_out);
    let written = reply_out
        .write_all(&wire::encode_reply(&reply))
        .and_then(|()| reply_out.flush());
    tracing::debug!(
        "worker: reply encoded and written in {:.1} ms",
        start.elapsed().as_secs_f64() * 1e3
    );
    written.map_err(|error| Error::internal(format!("worker: cannot write the reply: {error}")))?;
    Ok(ExitCode::SUCCESS)
}

/// Loads the plugin and runs the planner, telling the host on `reply_out` when the planner
/// starts; errors become a `failed` reply.
fn serve(config: &WorkerConfig, reply_out: &mut File) -> Result<WorkerReply> {
    let limits = &config.limits;
    let start = std::time::Instant::now();
    let mut bytes = Vec::new();
    std::io::stdin()
        .lock()
        .read_to_end(&mut bytes)
        .map_err(|error| {
            Error::internal(format!("worker: cannot read the plan request: {error}"))
        })?;
    let received = start.elapsed();
    let request: PlanRequest = wire::decode_request(&bytes)
        .map_err(|error| Error::internal(format!("worker: unreadable plan request: {error}")))?;
    drop(bytes);
    tracing::debug!(
        "worker: request of {} tensors received in {:.1} ms, decoded in {:.1} ms",
        request.tensors.len(),
        received.as_secs_f64() * 1e3,
        (start.elapsed() - received).as_secs_f64() * 1e3
    );
    let start = std::time::Instant::now();

    let path = &config.plugin_file;
    let opened = OpenedPlugin::open(path, config.allow_insecure)
        .map_err(|reason| Error::plugin(format!("{}: {reason}", path.display())))?;
    if opened.sha256 != config.sha256 {
        return Err(Error::plugin(format!(
            "{} changed after memplan checked it (SHA-256 {} then, {} now); not loaded",
            path.display(),
            config.sha256,
            opened.sha256
        )));
    }
    let module = open_module(&opened.into_load_path()).map_err(|failure| {
        let reason = match failure {
            LoadFailure::NotAPlugin { detail } => format!("not a memplan plugin ({detail})"),
            LoadFailure::Rejected { reason, .. } => reason,
        };
        Error::plugin(format!("{}: {reason}", path.display()))
    })?;
    let planners = module.planners();
    let entry = planners
        .iter()
        .find(|entry| entry.name.as_str() == config.planner)
        .ok_or_else(|| {
            Error::plugin(format!(
                "{} does not export planner `{}`",
                path.display(),
                config.planner
            ))
        })?;
    tracing::debug!(
        "worker: plugin checked and loaded in {:.1} ms",
        start.elapsed().as_secs_f64() * 1e3
    );
    writeln!(reply_out, "{STARTED_LINE}")
        .map_err(|error| Error::internal(format!("worker: cannot write to the host: {error}")))?;
    Ok(
        match call_planner(&config.planner, entry, &request, limits) {
            Ok(plan) => WorkerReply::Plan(plan),
            Err(error) => WorkerReply::Error(error),
        },
    )
}

/// Keeps the process's stdout for the reply alone and points file descriptor 1 at stderr, so
/// that whatever a plugin prints (it might `println!`) goes to the user's terminal instead of
/// corrupting the reply.
fn reserve_stdout_for_the_reply() -> Result<File> {
    crate::registry::stdout::redirect_stdout_to_stderr()
        .map(File::from)
        .map_err(|error| Error::internal(format!("worker: cannot set up its output: {error}")))
}
