//! The runs the five tutorial sources publish, as data: the chapters chart them (the
//! `published` block) beside the runs a learner makes, so a number on the page is always the
//! one the source printed. Every value is kept as text, exactly as its source prints it
//! (`8.362020`, `1h32m`, `78%`), and read as a number only to be drawn; each row names the
//! checklist row (`docs/coverage.md`) it comes from, so a chart can cite it.

/// A named table of published runs.
#[derive(Debug, PartialEq)]
pub struct Table {
    pub name: &'static str,
    pub title: &'static str,
    /// What every value measures, unless a row says otherwise.
    pub unit: &'static str,
    pub columns: Columns,
    pub rows: &'static [Row],
}

/// What the values of a row are.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Columns {
    /// Successive epochs of one run, the first of them numbered `first` (logs that skip the
    /// warm-up epoch start at 2).
    Epochs { first: u32 },
    /// One value per named measure (benchy's three trials of one configuration).
    Measures(&'static [&'static str]),
    /// One figure per row.
    Single,
}

/// One run (or one measured figure) of a table.
#[derive(Debug, PartialEq)]
pub struct Row {
    pub label: &'static str,
    /// The checklist row the values come from, e.g. `004-48`; its first three digits name the
    /// source document.
    pub checklist: &'static str,
    /// As printed, in the order of the table's columns.
    pub values: &'static [&'static str],
    /// The source's own summary of the run, word for word (`about 8.8`), where it gives one.
    pub said: Option<&'static str>,
    /// The row's unit where it is not the table's (one table holds memory and throughput).
    pub unit: Option<&'static str>,
}

impl Row {
    const fn new(label: &'static str, checklist: &'static str, values: &'static [&'static str]) -> Row {
        Row { label, checklist, values, said: None, unit: None }
    }

    const fn said(self, said: &'static str) -> Row {
        Row { said: Some(said), ..self }
    }

    const fn in_unit(self, unit: &'static str) -> Row {
        Row { unit: Some(unit), ..self }
    }

    /// The values as numbers (see [`number`]).
    pub fn numbers(&self) -> Vec<Option<f64>> {
        self.values.iter().map(|v| number(v)).collect()
    }

    /// The number the source's summary gives (its last word: `about 8.8` is 8.8).
    pub fn summary(&self) -> Option<f64> {
        self.said.and_then(|s| s.split_whitespace().last()).and_then(number)
    }

    pub fn unit<'a>(&'a self, table: &'a Table) -> &'a str {
        self.unit.unwrap_or(table.unit)
    }
}

impl Table {
    /// The source documents of the rows with their checklist rows, in order of appearance:
    /// `SC22 README (rows 004-10, 004-14)`.
    pub fn citation(&self) -> String {
        let mut by_document: Vec<(&str, Vec<&str>)> = Vec::new();
        for row in self.rows {
            let document = document(row.checklist);
            match by_document.iter_mut().find(|(d, _)| *d == document) {
                Some((_, ids)) if ids.contains(&row.checklist) => {}
                Some((_, ids)) => ids.push(row.checklist),
                None => by_document.push((document, vec![row.checklist])),
            }
        }
        let parts: Vec<String> = by_document
            .into_iter()
            .map(|(document, ids)| format!("{document} ({} {})", if ids.len() == 1 { "row" } else { "rows" }, ids.join(", ")))
            .collect();
        parts.join("; ")
    }
}

/// The five sources, by the seed number that starts their checklist rows.
const DOCUMENTS: [(&str, &str); 5] = [
    ("000", "DL4SCI25 README"),
    ("001", "SC23 README"),
    ("002", "JSC distributed-training slides"),
    ("003", "NERSC Data Day 2024 slides"),
    ("004", "SC22 README"),
];

/// The document a checklist row (`004-48`) belongs to.
pub fn document(checklist: &str) -> &'static str {
    let seed = checklist.split('-').next().unwrap_or_default();
    DOCUMENTS.iter().find(|(s, _)| *s == seed).map_or("an unknown source", |(_, title)| title)
}

/// A printed value as a number: a decimal (`8.362020`), a percentage (`78%` is 78) or a
/// duration in hours and minutes (`1h32m` is 92, in minutes).
pub fn number(printed: &str) -> Option<f64> {
    let printed = printed.trim();
    if let Some(percent) = printed.strip_suffix('%') {
        return percent.parse().ok();
    }
    if let Some(duration) = printed.strip_suffix('m') {
        let (hours, minutes) = duration.split_once('h').unwrap_or(("0", duration));
        return Some(hours.parse::<f64>().ok()? * 60.0 + minutes.parse::<f64>().ok()?);
    }
    printed.parse().ok().filter(|n: &f64| n.is_finite())
}

pub const NAMES: [&str; 9] = [
    "dl4sci25-ladder",
    "sc23-ladder",
    "sc23-workers",
    "sc22-ladder",
    "sc22-benchy",
    "sc22-ddp-knobs",
    "sc22-weak-scaling",
    "mp-memory",
    "jsc-runtimes",
];

pub fn table(name: &str) -> Option<&'static Table> {
    TABLES.iter().find(|t| t.name == name)
}

const SAMPLES_PER_S: &str = "samples/s";

/// Four epochs of the `short` config on one 40 GB A100, batch 16 (DL4SCI25 and SC23).
const FOUR_EPOCHS: Columns = Columns::Epochs { first: 1 };

/// SC23's 4-worker run: the top of its worker sweep and a step of its ladder.
const SC23_4_WORKERS: Row =
    Row::new("4 workers", "001-17", &["11.800979252989633", "12.391589774655767", "12.507586355902198", "12.42253671137738"])
        .said("around 12.4");

static TABLES: [Table; 9] = [
    Table {
        name: "dl4sci25-ladder",
        title: "DL4SCI25, one A100: each optimisation in turn",
        unit: SAMPLES_PER_S,
        columns: FOUR_EPOCHS,
        rows: &[
            Row::new("baseline", "000-24", &["8.362020", "9.222633", "8.634041", "8.802044"]).said("about 8.8"),
            Row::new("8 data workers", "000-28", &["11.307422", "11.768901", "12.229287", "11.991085"]).said("around 12"),
            Row::new("8 workers, TF32 off", "000-33", &["9.392585", "9.235503", "9.188759", "9.252243"]),
            Row::new("8 workers + fp16 AMP", "000-36", &["28.474664", "37.520115", "37.654960", "35.940697"]).said("over 37"),
            Row::new("+ fused Adam + JIT", "000-39", &["10.960820", "43.924494", "41.666471", "40.921871"]).said("40"),
        ],
    },
    Table {
        name: "sc23-ladder",
        title: "SC23, one A100: each optimisation in turn",
        unit: SAMPLES_PER_S,
        columns: FOUR_EPOCHS,
        rows: &[
            Row::new("baseline", "001-09", &["8.12429556382808", "9.380930772248819", "9.37966231403635", "9.371451740614114"])
                .said("about 9.3"),
            SC23_4_WORKERS,
            Row::new("DALI", "001-22", &["12.887900501674608", "13.286069138928777", "13.285346079312022", "13.281769173080217"]),
            Row::new("DALI, TF32 off", "001-25", &["9.817108848768507", "10.112952047100768", "10.111283148363873", "10.112859752596927"]),
            Row::new("DALI + fp16 AMP", "001-27", &["35.59554423387713", "42.46077954432662", "42.53371534149218", "42.499671983153895"])
                .said("over 42"),
            Row::new("DALI + bf16 AMP", "001-27", &["36.09893845727918", "42.64102358615585", "42.63420711325447", "42.620959661033474"])
                .said("over 42"),
            Row::new("+ fused Adam", "001-29", &["37.0357520752129", "42.67954727655909", "42.686919602555214", "42.63348428183284"]),
            Row::new(
                "+ JIT (torch.compile)",
                "001-30",
                &["11.465516720848926", "42.73979237119447", "42.849252309273034", "42.83777982234843"],
            ),
        ],
    },
    Table {
        name: "sc23-workers",
        title: "SC23, one A100: data-loader workers",
        unit: SAMPLES_PER_S,
        columns: FOUR_EPOCHS,
        rows: &[
            SC23_4_WORKERS,
            Row::new("8 workers", "001-17", &["11.242452065156796", "12.351831736527942", "11.897590940268149", "12.032574205380119"]),
            Row::new("16 workers", "001-17", &["10.701940397915974", "11.089386324076328", "11.006053667740602", "11.314463397384783"]),
        ],
    },
    Table {
        name: "sc22-ladder",
        title: "SC22 (U-Net), one A100, batch 64: each optimisation in turn",
        unit: SAMPLES_PER_S,
        columns: Columns::Epochs { first: 1 },
        rows: &[
            Row::new("baseline", "004-10", &["37.1630387697139", "83.96010386833387", "86.52393930902795"]).said("about 85"),
            Row::new("4 workers", "004-14", &["51.761903290155644", "159.20079686999583", "163.18183428511588"]),
            Row::new("8 workers", "004-14", &["65.75070032587757", "268.00791219045453", "274.16425081917566"]).said("around 270"),
            Row::new("16 workers", "004-14", &["65.63823122463319", "252.27164688560939", "253.46804142012112"]),
            Row::new("DALI", "004-17", &["16.22847593455831", "394.0753911417279", "395.1682739380698"]),
            Row::new("DALI, TF32 off", "004-20", &["15.407546132048822", "132.81332462685626", "132.7290770389302"]),
            Row::new("DALI + AMP", "004-21", &["15.588682847297035", "488.8121258197197", "512.8721496122143"]),
            Row::new("+ APEX fused Adam", "004-23", &["15.599217423251996", "486.97098041865706", "534.0839783503462"]),
            Row::new("+ JIT", "004-24", &["14.709059794327901", "496.44744599973154", "542.0108517203818"]),
        ],
    },
    Table {
        name: "sc22-benchy",
        title: "SC22 (U-Net), benchy: data loading alone, compute alone, both",
        unit: SAMPLES_PER_S,
        columns: Columns::Measures(&["IO", "SYNTHETIC", "FULL"]),
        rows: &[
            Row::new("baseline", "004-13", &["89.177", "376.537", "89.971"]),
            Row::new("8 workers", "004-16", &["303.304", "359.426", "252.044"]),
            Row::new("DALI", "004-19", &["779.272", "421.592", "396.084"]),
            Row::new("DALI + AMP", "004-22", &["786.928", "661.640", "512.194"]),
            Row::new("+ APEX + JIT", "004-24", &["792.513", "707.966", "538.593"]),
        ],
    },
    Table {
        name: "sc22-ddp-knobs",
        title: "SC22 (U-Net), DistributedDataParallel knobs, local batch 16",
        unit: SAMPLES_PER_S,
        columns: Columns::Epochs { first: 2 },
        rows: &[
            Row::new("4 GPUs, baseline", "004-47", &["1061.4512304471264", "1264.7321130581577", "1271.6916350810875"]),
            Row::new("4 GPUs, no broadcast buffers", "004-48", &["1045.5123652804289", "1304.705798202663", "1315.088933035222"]),
            Row::new("4 GPUs, + 100 MB buckets", "004-49", &["1109.5304256706254", "1317.0452716437817", "1316.4084370067546"]),
            Row::new("2 nodes, baseline", "004-50", &["1474.2891040731388", "1844.0018315113414", "1823.245429594067"]),
            Row::new("2 nodes, tuned", "004-50", &["1494.67913689953", "1880.3240616534827", "1856.8614843673777"]),
        ],
    },
    Table {
        name: "sc22-weak-scaling",
        title: "SC22 (U-Net), weak scaling at 32 nodes (128 GPUs)",
        unit: "%",
        columns: Columns::Single,
        rows: &[
            Row::new("efficiency, local batch 64", "004-44", &["78%"]).said("around 78%"),
            Row::new("communication overhead, local batch 64", "004-45", &["25%"]).said("around 25%"),
            Row::new("efficiency, local batch 128", "004-46", &["89%"]).said("around 89%"),
            Row::new("communication overhead, local batch 128", "004-46", &["12%"]),
        ],
    },
    Table {
        name: "mp-memory",
        title: "Tensor parallelism: memory and throughput (DL4SCI25 width 1536, SC23 width 1024)",
        unit: "GB after the forward pass",
        columns: Columns::Epochs { first: 1 },
        rows: &[
            Row::new("DL4SCI25 tp 1 (80 GB GPU)", "000-71", &["53.37744140625", "54.43212890625", "54.43212890625", "54.43212890625"])
                .said("around 55"),
            Row::new("DL4SCI25 tp 4", "000-75", &["36.1522216796875", "38.1365966796875", "38.4471435546875", "38.7576904296875"])
                .said("reduced to 39"),
            Row::new(
                "SC23 tp 1 (80 GB GPU)",
                "001-41",
                &["40.0841064453125", "41.20123291015625", "41.20123291015625", "41.20123291015625"],
            )
            .said("around 41"),
            Row::new("SC23 tp 4", "001-42", &["28.6165771484375", "32.7415771484375", "32.7415771484375", "32.7415771484375"])
                .said("reduced to 32.7"),
            Row::new("DL4SCI25 tp 1 (80 GB GPU)", "000-71", &["46.137832", "51.306080", "51.194841"]).in_unit(SAMPLES_PER_S),
            Row::new("DL4SCI25 tp 4", "000-75", &["61.065866", "72.585702", "72.350747", "71.889093"]).in_unit(SAMPLES_PER_S),
            Row::new("SC23 tp 1 (80 GB GPU)", "001-41", &["47.8410141021346", "48.0196417341964", "48.01662782862127"])
                .in_unit(SAMPLES_PER_S),
            Row::new("SC23 tp 4", "001-42", &["113.13085046518637", "114.46491348789367", "114.43958207729146"]).in_unit(SAMPLES_PER_S),
        ],
    },
    Table {
        name: "jsc-runtimes",
        title: "JSC: the same training on more GPUs",
        unit: "minutes",
        columns: Columns::Single,
        rows: &[
            Row::new("1 GPU", "002-27", &["1h32m"]),
            Row::new("4 GPUs (one node)", "002-27", &["25m"]),
            Row::new("8 GPUs (two nodes)", "002-27", &["14m"]),
        ],
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_tables_resolve_by_every_name() {
        assert_eq!(TABLES.iter().map(|t| t.name).collect::<Vec<_>>(), NAMES);
        for name in NAMES {
            assert_eq!(table(name).map(|t| t.name), Some(name));
        }
        assert!(table("sc24-ladder").is_none());
    }

    #[test]
    fn published_rows_are_full_and_every_value_reads_as_a_number() {
        for table in &TABLES {
            assert!(!table.rows.is_empty(), "{}", table.name);
            for row in table.rows {
                assert!(!row.label.is_empty() && !row.values.is_empty(), "{}: {row:?}", table.name);
                assert!(row.numbers().iter().all(Option::is_some), "{}: {row:?}", table.name);
                assert!(row.said.is_none() || row.summary().is_some(), "{}: {row:?}", table.name);
                assert_ne!(document(row.checklist), "an unknown source", "{}: {row:?}", table.name);
                match table.columns {
                    Columns::Measures(names) => assert_eq!(row.values.len(), names.len(), "{}: {row:?}", table.name),
                    Columns::Single => assert_eq!(row.values.len(), 1, "{}: {row:?}", table.name),
                    Columns::Epochs { .. } => {}
                }
            }
        }
    }

    #[test]
    fn published_values_read_as_printed() {
        assert_eq!(number("8.362020"), Some(8.36202));
        assert_eq!(number("78%"), Some(78.0));
        assert_eq!(number("1h32m"), Some(92.0));
        assert_eq!(number("25m"), Some(25.0));
        assert_eq!(number("about"), None);
        assert_eq!(number("NaN"), None);
        let baseline = &table("dl4sci25-ladder").unwrap().rows[0];
        assert_eq!(baseline.summary(), Some(8.8));
        assert_eq!(table("mp-memory").unwrap().rows[1].summary(), Some(39.0));
    }

    #[test]
    fn published_citations_name_each_document_and_its_rows_once() {
        assert_eq!(table("sc23-workers").unwrap().citation(), "SC23 README (row 001-17)");
        assert_eq!(table("mp-memory").unwrap().citation(), "DL4SCI25 README (rows 000-71, 000-75); SC23 README (rows 001-41, 001-42)");
        assert_eq!(table("jsc-runtimes").unwrap().citation(), "JSC distributed-training slides (row 002-27)");
    }

    #[test]
    fn published_rows_take_the_tables_unit_unless_they_name_their_own() {
        let mp = table("mp-memory").unwrap();
        assert_eq!(mp.rows[0].unit(mp), "GB after the forward pass");
        assert_eq!(mp.rows[4].unit(mp), "samples/s");
    }
}
