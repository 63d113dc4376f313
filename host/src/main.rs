//! The `memplan` binary: everything is in the library, where tests can reach it.

fn main() -> std::process::ExitCode {
    memplan::main()
}
