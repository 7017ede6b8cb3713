//! JSON: a result serialised as it is written (a week of history never becomes a JSON tree in
//! memory); a reader that closed the pipe (`| head`) is no failure.

use std::io::Write;

/// Writes `value` as pretty JSON and a newline on standard output.
pub fn print<T: serde::Serialize + ?Sized>(value: &T) -> anyhow::Result<()> {
    let mut w = std::io::BufWriter::new(std::io::stdout().lock());
    let written = serde_json::to_writer_pretty(&mut w, value)
        .map_err(std::io::Error::from)
        .and_then(|()| {
            writeln!(w)?;
            w.flush()
        });
    match written {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}
