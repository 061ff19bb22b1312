//! `fusiond audit verify FILE...`: checks the audit log's chain through the
//! files in order (a rotated `.1` first). Exit status: 0 whole, 1 broken
//! (the first bad line named), 2 a file could not be read.

use crate::audit::{verify, AuditError};
use anyhow::Result;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    #[command(subcommand)]
    pub command: AuditCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum AuditCommand {
    /// Check the chain of SHA-256 hashes through the files, oldest first.
    Verify {
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

pub fn audit(args: AuditArgs) -> Result<u8> {
    let AuditCommand::Verify { files } = args.command;
    match verify(&files) {
        Ok(n) => {
            println!("audit log whole: {n} lines, every line's prev is the SHA-256 of the one before");
            Ok(0)
        }
        Err(e @ AuditError::Broken { .. }) => {
            println!("audit log broken: {e}");
            Ok(1)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(2)
        }
    }
}
