//! Input files opened with care: regular files only (not /proc, /sys, /dev), bounded reads.

use crate::error::BadInput;

/// Opens `path` for reading if it is a regular file (not a directory, a device such as
/// /dev/zero, or a FIFO); `what` names it in the error.
pub fn open_regular_file(path: &std::path::Path, what: &str) -> Result<std::fs::File, BadInput> {
    let shown = path.display();
    // A kernel or device file (`/proc/self/environ`, `/dev/stdin` …) is never an input: a
    // profile that names one would send the process's secrets as a body.
    if let Ok(real) = std::fs::canonicalize(path) {
        if ["/proc", "/sys", "/dev"]
            .iter()
            .any(|k| real.starts_with(k))
        {
            return Err(BadInput(format!(
                "{what} {shown} is not a regular file but a kernel or device file (under {}): \
                 n8ncap reads no file under /proc, /sys or /dev — give the path of a regular file",
                real.iter()
                    .take(2)
                    .collect::<std::path::PathBuf>()
                    .display()
            )));
        }
    }
    // Opened without blocking, so a FIFO with no writer is refused below instead of hanging
    // the open (reads of a regular file are not changed by the flag).
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| BadInput(format!("cannot read {what} {shown}: {e}")))?;
    let meta = file
        .metadata()
        .map_err(|e| BadInput(format!("cannot read {what} {shown}: {e}")))?;
    if !meta.is_file() {
        return Err(BadInput(format!(
            "{what} {shown} is not a regular file: give the path of a file"
        )));
    }
    Ok(file)
}

/// Reads a UTF-8 text file of at most `max` bytes; larger, binary or unreadable input is
/// refused with the file named.
pub fn read_text_file(path: &std::path::Path, max: u64, what: &str) -> Result<String, BadInput> {
    use std::io::Read;
    let shown = path.display();
    let file = open_regular_file(path, what)?;
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| BadInput(format!("cannot read {what} {shown}: {e}")))?;
    if bytes.len() as u64 > max {
        return Err(BadInput(format!(
            "{what} {shown} is larger than {} KiB: is it the right file?",
            max / 1024
        )));
    }
    if bytes.contains(&0) {
        return Err(BadInput(format!(
            "{what} {shown} is binary, not text: is it the right file?"
        )));
    }
    String::from_utf8(bytes).map_err(|e| {
        BadInput(format!(
            "{what} {shown} is not UTF-8 text (byte {}): save it as UTF-8",
            e.utf8_error().valid_up_to()
        ))
    })
}
