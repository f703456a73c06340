//! Files replaced so that a crash leaves the old file or the new one, never half of one: a
//! temporary file in the same directory (random name, O_EXCL, the old file's mode), fsync,
//! rename over the old file, fsync the directory. The policy file and polycc-tune's state use it.

use std::io::{self, Write};
use std::path::Path;

/// Write `bytes` to `path` so that a crash leaves the old file or the new one.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomically_with(path, |f| f.write_all(bytes))
}

/// [`write_atomically`] with the write step given (tests inject a failing one).
///
/// The temporary file is created beside `path` with a random name, O_EXCL and mode 0600
/// (`tempfile`), so nothing planted in the directory can redirect the write; it takes the mode of
/// the file it replaces. A `path` that is a symlink is refused: renaming over it would replace the
/// link, and following it would write wherever it points.
pub fn write_atomically_with(path: &Path, write: impl FnOnce(&mut std::fs::File) -> io::Result<()>) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file path"))?;
    let mode = match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is a symlink; give the file's real path", path.display()),
            ))
        }
        Ok(m) => m.permissions().mode() & 0o7777,
        Err(e) if e.kind() == io::ErrorKind::NotFound => 0o600,
        Err(e) => return Err(e),
    };
    let mut tmp =
        tempfile::Builder::new().prefix(&format!(".{}.", name.to_string_lossy())).suffix(".tmp").tempfile_in(dir)?;
    write(tmp.as_file_mut())?;
    tmp.as_file().set_permissions(std::fs::Permissions::from_mode(mode))?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    // The rename itself is durable only once the directory is.
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_leaves_the_old_file_intact() {
        let tmp = tempfile::tempdir().unwrap();
        let (dir, path) = (tmp.path(), tmp.path().join("policy.toml"));
        write_atomically(&path, b"old contents\n").unwrap();
        let e = write_atomically_with(&path, |f| {
            f.write_all(b"half of the new")?;
            Err(io::Error::other("disk full"))
        })
        .unwrap_err();
        assert_eq!(e.to_string(), "disk full");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old contents\n");
        let left: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, [std::ffi::OsString::from("policy.toml")], "no temp file left behind");
        write_atomically(&path, b"new\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
    }

    /// Issue 16 A3: the temporary name was predictable and opened without O_EXCL/O_NOFOLLOW (a
    /// symlink planted there redirected the write), and a 0600 file came back 0644.
    #[test]
    fn atomic_writes_keep_the_mode_follow_no_planted_link_and_refuse_a_symlinked_target() {
        use std::os::unix::fs::{symlink, PermissionsExt};
        let tmp = tempfile::tempdir().unwrap();
        let (dir, path) = (tmp.path(), tmp.path().join("policy.toml"));
        std::fs::write(&path, "old\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let victim = dir.join("victim");
        std::fs::write(&victim, "untouched\n").unwrap();
        symlink(&victim, dir.join(format!(".policy.toml.tmp.{}", std::process::id()))).unwrap();
        write_atomically(&path, b"new\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600, "mode kept");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched\n", "the planted link was followed");
        // A target that is itself a symlink is refused, and the link's target left alone.
        let link = dir.join("linked.toml");
        symlink(&victim, &link).unwrap();
        let e = write_atomically(&link, b"x").unwrap_err();
        assert!(e.to_string().contains("symlink"), "{e}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched\n");
    }
}
