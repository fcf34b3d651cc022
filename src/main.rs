use clap::Parser;
use std::process::ExitCode;
use trtkit::cli;

fn main() -> ExitCode {
    // Before any thread starts: it may write the process environment.
    trtkit::backend::tract_kernels::choose();
    let args =
        match cli::Cli::try_parse_from(cli::args::shapes::spread_dim_values(std::env::args_os())) {
            Ok(args) => args,
            Err(err) => return cli::parse_failure(err),
        };
    cli::init_logging(args.verbose, args.quiet);
    cli::exit_code(cli::run(args))
}
