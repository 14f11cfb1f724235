//! The GPU vendors' profilers' traces read into a [`Run`]: Nsight Systems' `cuda_gpu_trace`
//! report and rocprofv3's kernel and memory-copy traces, all CSV.

use std::collections::HashMap;

use super::record::{Copy, Launch, Run, Timer};

/// The rows of a CSV text (RFC 4180: quoted fields, doubled quotes), from the first line
/// whose first field is `first_header` (tools print lines of their own before the table).
pub fn csv_rows(text: &str, first_header: &str) -> Vec<HashMap<String, String>> {
    let mut lines = text
        .lines()
        .skip_while(|l| fields(l).first().map(String::as_str) != Some(first_header));
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let header = fields(header);
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| header.iter().cloned().zip(fields(l)).collect())
        .collect()
}

fn fields(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(std::mem::take(&mut field)),
            (c, _) => field.push(c),
        }
    }
    out.push(field);
    out
}

fn number(row: &HashMap<String, String>, names: &[&str]) -> Option<f64> {
    names
        .iter()
        .find_map(|n| row.get(*n))
        .and_then(|v| v.trim().parse::<f64>().ok())
}

fn field<'a>(row: &'a HashMap<String, String>, names: &[&str]) -> Option<&'a str> {
    names.iter().find_map(|n| row.get(*n)).map(String::as_str)
}

/// A kernel's name as a profiler prints it (`saxpy`, `void k<int>(int*)`): its identifier.
fn short_name(name: &str) -> String {
    let name = name.split('(').next().unwrap_or(name).trim();
    name.rsplit([' ', ':']).next().unwrap_or(name).to_owned()
}

/// `nsys stats --report cuda_gpu_trace --format csv`: kernels (those with a grid) and copies
/// (`[CUDA memcpy HtoD]`, `DtoH`).
pub fn nsys_trace(text: &str, device: &str) -> Run {
    let mut run = Run::empty(Timer::Nsys, device);
    for row in csv_rows(text, "Start (ns)") {
        let (Some(start), Some(duration)) = (
            number(&row, &["Start (ns)"]),
            number(&row, &["Duration (ns)"]),
        ) else {
            continue;
        };
        let name = field(&row, &["Name"]).unwrap_or("");
        let stream = number(&row, &["Strm"]).unwrap_or(0.0) as u64;
        if name.contains("memcpy") {
            // `Bytes (MB)` is in millions of bytes.
            let bytes = number(&row, &["Bytes (MB)"]).map_or(0, |mb| (mb * 1e6) as u64);
            run.copies.push(Copy {
                to_device: name.contains("HtoD"),
                stream,
                start_ns: start as u64,
                duration_ns: duration as u64,
                bytes,
            });
        } else if number(&row, &["GrdX"]).is_some() {
            run.launches.push(Launch {
                kernel: short_name(name),
                module: String::new(),
                stream,
                start_ns: start as u64,
                duration_ns: duration as u64,
                bytes: None,
            });
        }
    }
    run
}

/// rocprofv3's `kernel_trace.csv` and `memory_copy_trace.csv`.
pub fn rocprof_traces(kernels: &str, copies: &str, device: &str) -> Run {
    let mut run = Run::empty(Timer::Rocprofv3, device);
    let span = |row: &HashMap<String, String>| {
        let start = number(row, &["Start_Timestamp"])?;
        let end = number(row, &["End_Timestamp"])?;
        Some((start as u64, (end - start).max(0.0) as u64))
    };
    for row in csv_rows(kernels, "Kind") {
        let Some((start_ns, duration_ns)) = span(&row) else {
            continue;
        };
        run.launches.push(Launch {
            kernel: short_name(field(&row, &["Kernel_Name"]).unwrap_or("")),
            module: String::new(),
            stream: number(&row, &["Stream_Id", "Queue_Id"]).unwrap_or(0.0) as u64,
            start_ns,
            duration_ns,
            bytes: None,
        });
    }
    for row in csv_rows(copies, "Kind") {
        let Some((start_ns, duration_ns)) = span(&row) else {
            continue;
        };
        run.copies.push(Copy {
            to_device: field(&row, &["Direction"]).is_some_and(|d| d.contains("HOST_TO_DEVICE")),
            stream: number(&row, &["Stream_Id", "Queue_Id"]).unwrap_or(0.0) as u64,
            start_ns,
            duration_ns,
            bytes: number(&row, &["Bytes", "Size"]).unwrap_or(0.0) as u64,
        });
    }
    run
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nsys_traces_give_launches_and_copies() {
        let csv = "Processing [r.sqlite] with [cuda_gpu_trace.py]...\n\n\
            \"Start (ns)\",\"Duration (ns)\",\"CorrId\",\"GrdX\",\"GrdY\",\"GrdZ\",\"BlkX\",\"BlkY\",\"BlkZ\",\"Bytes (MB)\",\"Strm\",\"Name\"\n\
            100,50,1,,,,,,,4.194,7,\"[CUDA memcpy HtoD]\"\n\
            200,1000,2,4096,1,1,256,1,1,,7,\"saxpy\"\n\
            1300,900,3,64,1,1,256,1,1,,7,\"void scale<float>(float*, int)\"\n";
        let run = nsys_trace(csv, "cuda:0");
        assert_eq!(run.copies.len(), 1);
        assert_eq!(run.copies[0].bytes, 4_194_000);
        assert!(run.copies[0].to_device);
        let kernels: Vec<&str> = run.launches.iter().map(|l| l.kernel.as_str()).collect();
        assert_eq!(kernels, ["saxpy", "scale<float>"]);
        assert_eq!(run.launches[1].stream, 7);
    }

    #[test]
    fn rocprof_traces_give_launches_and_copies() {
        let kernels = "\"Kind\",\"Agent_Id\",\"Queue_Id\",\"Stream_Id\",\"Kernel_Name\",\"Start_Timestamp\",\"End_Timestamp\"\n\
            \"KERNEL_DISPATCH\",1,1,0,\"saxpy\",1000,3000\n";
        let copies = "\"Kind\",\"Direction\",\"Stream_Id\",\"Bytes\",\"Start_Timestamp\",\"End_Timestamp\"\n\
            \"MEMORY_COPY\",\"MEMORY_COPY_HOST_TO_DEVICE\",0,4096,10,90\n";
        let run = rocprof_traces(kernels, copies, "hip:0");
        assert_eq!(run.launches[0].duration_ns, 2000);
        assert_eq!(run.copies[0].bytes, 4096);
        assert!(run.copies[0].to_device);
    }
}
