//! The export's files, written on a thread of their own: Parquet's encoding,
//! Snappy and the writes take about as long as reading the store and
//! building the rows, so the two halves run side by side on two cores.
//! Batches reach it through a channel of a few slots, which keeps memory
//! flat: a reader ahead of the files waits.

use std::{
    collections::HashMap,
    fs::{self, File},
    io::BufWriter,
    path::{Path, PathBuf},
    sync::mpsc::{Receiver, SyncSender, sync_channel},
    thread::JoinHandle,
};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::{
    arrow::ArrowWriter,
    basic::Compression,
    file::{
        metadata::KeyValue,
        properties::{EnabledStatistics, WriterProperties},
    },
    schema::types::ColumnPath,
};

use super::{Options, ParquetExportError, SCHEMA_ID, tables};

/// What the rows' side asks of the files' side; a file is known by a number.
pub enum ToFiles {
    Open {
        file: usize,
        path: PathBuf,
        schema: SchemaRef,
    },
    Rows {
        file: usize,
        batch: RecordBatch,
    },
    Close {
        file: usize,
    },
}

/// What the files' side leaves: (temporary name, final name) of every file
/// closed, the temporary names of those still open, and its error if any.
#[derive(Default)]
pub struct FilesDone {
    pub closed: Vec<(PathBuf, PathBuf)>,
    pub still_open: Vec<PathBuf>,
    pub error: Option<ParquetExportError>,
}

/// Batches in flight between the two sides.
const SLOTS: usize = 4;

/// Starts the files' thread.
pub fn start(
    options: Options,
) -> Result<(SyncSender<ToFiles>, JoinHandle<FilesDone>), ParquetExportError> {
    let (tx, rx) = sync_channel(SLOTS);
    let handle = std::thread::Builder::new()
        .name("parquet-files".into())
        .spawn(move || write_files(rx, options))
        .map_err(|source| ParquetExportError::Io {
            path: PathBuf::from("(a thread for the Parquet files)"),
            source,
        })?;
    Ok((tx, handle))
}

/// Runs until the rows' side hangs up, or until a file fails (then it
/// returns at once, and the rows' side finds its channel closed).
fn write_files(rx: Receiver<ToFiles>, options: Options) -> FilesDone {
    let mut open: HashMap<usize, TableFile> = HashMap::new();
    let mut done = FilesDone::default();
    for message in rx {
        let result = match message {
            ToFiles::Open { file, path, schema } => {
                TableFile::create(path, schema, &options).map(|f| {
                    open.insert(file, f);
                })
            }
            ToFiles::Rows { file, batch } => match open.get_mut(&file) {
                Some(f) => f.write(&batch),
                None => Ok(()),
            },
            ToFiles::Close { file } => match open.remove(&file) {
                Some(f) => f.close().map(|names| done.closed.push(names)),
                None => Ok(()),
            },
        };
        if let Err(e) = result {
            done.error = Some(e);
            break;
        }
    }
    done.still_open = open.into_values().map(|f| f.tmp).collect();
    done
}

/// One table's file being written under its temporary name.
struct TableFile {
    tmp: PathBuf,
    path: PathBuf,
    writer: ArrowWriter<BufWriter<File>>,
}

impl TableFile {
    fn create(
        path: PathBuf,
        schema: SchemaRef,
        options: &Options,
    ) -> Result<Self, ParquetExportError> {
        let dir = path.parent().unwrap_or(Path::new("."));
        fs::create_dir_all(dir).map_err(|source| ParquetExportError::Io {
            path: dir.to_owned(),
            source,
        })?;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let tmp = dir.join(format!(".{}.tmp", name.unwrap_or_default()));
        let file = File::create(&tmp).map_err(|source| ParquetExportError::Io {
            path: tmp.clone(),
            source,
        })?;
        let writer = ArrowWriter::try_new(
            BufWriter::with_capacity(1 << 20, file),
            schema,
            Some(writer_properties(options)),
        )
        .map_err(|source| ParquetExportError::Encode {
            path: tmp.clone(),
            source,
        })?;
        Ok(Self { tmp, path, writer })
    }

    fn write(&mut self, batch: &RecordBatch) -> Result<(), ParquetExportError> {
        self.writer
            .write(batch)
            .map_err(|source| ParquetExportError::Encode {
                path: self.tmp.clone(),
                source,
            })
    }

    /// Writes the footer and fsyncs; the file keeps its temporary name.
    fn close(self) -> Result<(PathBuf, PathBuf), ParquetExportError> {
        let Self { tmp, path, writer } = self;
        let buffered = writer
            .into_inner()
            .map_err(|source| ParquetExportError::Encode {
                path: tmp.clone(),
                source,
            })?;
        let io_err = |source| ParquetExportError::Io {
            path: tmp.clone(),
            source,
        };
        let file = buffered.into_inner().map_err(|e| io_err(e.into_error()))?;
        file.sync_all().map_err(io_err)?;
        Ok((tmp, path))
    }
}

fn writer_properties(options: &Options) -> WriterProperties {
    let mut props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(options.row_group_rows.max(1)))
        .set_max_row_group_bytes(Some(options.row_group_bytes.max(1)))
        .set_created_by(format!("caal {}", env!("CARGO_PKG_VERSION")))
        .set_key_value_metadata(Some(vec![KeyValue::new(
            "caal.schema".into(),
            SCHEMA_ID.to_owned(),
        )]));
    for column in tables::UNIQUE_TEXT {
        let path = ColumnPath::from(*column);
        props = props
            .set_column_dictionary_enabled(path.clone(), false)
            .set_column_statistics_enabled(path, EnabledStatistics::None);
    }
    props.build()
}
