//! Minimal `.npy` (format 1.0, little-endian f32, C order) reading and
//! writing, so raw model inputs and outputs can be exchanged with NumPy.

use crate::infer::Tensor;
use std::io::{Read, Write};

#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    #[error("not a .npy file (bad magic)")]
    Magic,
    #[error("unsupported .npy header `{0}`: only little-endian float32 ('<f4') in C order is supported; use arr.astype('<f4')")]
    Header(String),
    #[error(".npy data is {got} bytes but the shape needs {want}")]
    Length { got: usize, want: usize },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

pub fn write(mut w: impl Write, t: &Tensor) -> Result<(), NpyError> {
    let shape = match t.shape() {
        [d] => format!("({d},)"),
        s => format!("({})", s.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
    };
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    w.write_all(b"\x93NUMPY\x01\x00")?;
    w.write_all(&(header.len() as u16).to_le_bytes())?;
    w.write_all(header.as_bytes())?;
    for v in t.data() {
        w.write_all(&v.to_le_bytes())?;
    }
    Ok(())
}

pub fn read(mut r: impl Read) -> Result<Tensor, NpyError> {
    let mut pre = [0u8; 10];
    r.read_exact(&mut pre)?;
    if &pre[..6] != b"\x93NUMPY" || pre[6] != 1 {
        return Err(NpyError::Magic);
    }
    let mut header = vec![0u8; u16::from_le_bytes([pre[8], pre[9]]) as usize];
    r.read_exact(&mut header)?;
    let header = String::from_utf8_lossy(&header).to_string();
    let compact: String = header.chars().filter(|c| !c.is_whitespace()).collect();
    if !compact.contains("'descr':'<f4'") || !compact.contains("'fortran_order':False") {
        return Err(NpyError::Header(header.trim().into()));
    }
    let dims = compact
        .split("'shape':(")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .ok_or_else(|| NpyError::Header(header.trim().into()))?;
    let shape = dims
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| NpyError::Header(header.trim().into()))?;
    let mut bytes = Vec::new();
    r.read_to_end(&mut bytes)?;
    let want = shape.iter().product::<usize>() * 4;
    if bytes.len() != want {
        return Err(NpyError::Length { got: bytes.len(), want });
    }
    let data = bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    Ok(Tensor::new(&shape, data).expect("length checked above"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_round_trips() {
        let t = Tensor::new(&[2, 3], vec![1.0, -2.0, 3.5, 0.0, 1e-3, 7.0]).unwrap();
        let mut buf = Vec::new();
        write(&mut buf, &t).unwrap();
        assert_eq!((buf.len() - t.len() * 4) % 64, 0, "header is 64-byte aligned");
        assert_eq!(read(&buf[..]).unwrap(), t);
    }

    #[test]
    fn truncated_npy_is_an_error_not_a_panic() {
        let t = Tensor::new(&[4], vec![1.0; 4]).unwrap();
        let mut buf = Vec::new();
        write(&mut buf, &t).unwrap();
        assert!(matches!(read(&buf[..buf.len() - 2]), Err(NpyError::Length { .. })));
        assert!(read(&b"garbage"[..]).is_err());
    }
}
