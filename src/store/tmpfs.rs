//! The ramdisk: make sure a path is a size-limited tmpfs, and how much room
//! it has.

use super::StageError;
use nix::sys::statfs::{statfs, TMPFS_MAGIC};
use std::path::Path;

/// Free and total bytes of the filesystem holding `path`.
pub fn space(path: &Path) -> Result<(u64, u64), StageError> {
    let s = nix::sys::statvfs::statvfs(path)
        .map_err(|e| StageError::Ramdisk { path: path.into(), message: format!("statvfs failed: {e}") })?;
    let unit = s.fragment_size() as u64;
    Ok((s.blocks_available() as u64 * unit, s.blocks() as u64 * unit))
}

pub fn is_tmpfs(path: &Path) -> Result<bool, StageError> {
    let s =
        statfs(path).map_err(|e| StageError::Ramdisk { path: path.into(), message: format!("statfs failed: {e}") })?;
    Ok(s.filesystem_type() == TMPFS_MAGIC)
}

/// Whether `path` is itself a mount point: its device differs from its
/// parent's. A directory inside /run is on a tmpfs without being one with a
/// size limit of its own.
pub fn is_mount_point(path: &Path) -> Result<bool, StageError> {
    use std::os::unix::fs::MetadataExt;
    let dev = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| m.dev())
            .map_err(|e| StageError::Ramdisk { path: p.into(), message: format!("stat failed: {e}") })
    };
    let parent = path.canonicalize().ok().and_then(|p| p.parent().map(Path::to_path_buf));
    match parent {
        Some(parent) => Ok(dev(path)? != dev(&parent)?),
        None => Ok(true),
    }
}

/// Ensures `path` is a tmpfs mounted there (not merely a directory on one,
/// like /run): creates the directory, and mounts a tmpfs of `size_mib`
/// when it is not one and we are root. Returns whether it mounted one.
pub fn ensure(path: &Path, size_mib: u64) -> Result<bool, StageError> {
    std::fs::create_dir_all(path)
        .map_err(|e| StageError::Ramdisk { path: path.into(), message: format!("cannot create it: {e}") })?;
    if is_tmpfs(path)? && is_mount_point(path)? {
        return Ok(false);
    }
    if !nix::unistd::geteuid().is_root() {
        return Err(StageError::Ramdisk {
            path: path.into(),
            message: "is not a tmpfs mount, and only root can mount one; run `fusiond stage` as root \
                      (fusiond-stage.service does) or mount a tmpfs there"
                .into(),
        });
    }
    use nix::mount::{mount, MsFlags};
    let opts = format!("size={size_mib}m,mode=0755");
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    mount(Some("tmpfs"), path, Some("tmpfs"), flags, Some(opts.as_str()))
        .map_err(|e| StageError::Ramdisk { path: path.into(), message: format!("mounting a tmpfs failed: {e}") })?;
    if !is_tmpfs(path)? || !is_mount_point(path)? {
        return Err(StageError::Ramdisk { path: path.into(), message: "is still not a tmpfs after mounting".into() });
    }
    log::info!("mounted a {size_mib} MiB tmpfs at {}", path.display());
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_on_a_filesystem_is_not_a_mount_point_but_the_root_is() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!is_mount_point(dir.path()).unwrap());
        assert!(is_mount_point(Path::new("/")).unwrap());
    }
}
