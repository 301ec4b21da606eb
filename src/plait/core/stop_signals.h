#pragma once
// "Save and stop" signals (docs/checkpoints.md, "Preemption"). A scheduler that takes the
// machines back signals the job and waits a grace period before SIGKILL: SLURM's
// `--signal=USR1@T` sends SIGUSR1 T seconds before the end; Open MPI's mpirun forwards SIGUSR1
// and SIGUSR2 to every rank, while on SIGTERM or SIGINT it sends SIGCONT at once, SIGTERM
// odls_base_sigkill_timeout seconds later (default 1) and SIGKILL as long again after that.
//
// install_stop_signal_handlers() makes SIGUSR1, SIGTERM and SIGINT set one flag; the training
// loop reads it (stop_signal()) and carries it in the reduction every step already does, so the
// whole job stops after the same step and saves it. The handler is async-signal-safe: the first
// signal only stores its number in a volatile sig_atomic_t; a second one (the same or another)
// writes one preformatted line with write(2), restores the default action and raises the signal
// again, so the process ends at once, as it would have without plait's handler.
namespace plait {

// Installs the handlers (sigaction, SA_RESTART: interrupted system calls resume). `rank` goes
// into the second signal's line ("plait: rank 1: second stop signal ..."); -1 leaves it out.
void install_stop_signal_handlers(int rank);
// The first stop signal received since installation (SIGUSR1, SIGTERM, SIGINT), or 0.
int stop_signal();
// "SIGUSR1", "SIGTERM", "SIGINT", or "signal N".
const char* stop_signal_name(int signal);

}  // namespace plait
