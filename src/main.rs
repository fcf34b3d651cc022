use clap::Parser;
use std::process::ExitCode;
use trtkit::cli;

fn main() -> ExitCode {
    // Before any thread starts: it may write the process environment.
    trtkit::backend::tract_kernels::choose();
    let args = cli::Cli::parse_from(cli::args::shapes::spread_dim_values(std::env::args_os()));
    cli::init_logging(args.verbose, args.quiet);
    cli::exit_code(cli::run(args))
}
