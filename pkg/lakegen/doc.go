// Package lakegen writes sample "lakes": folders of Parquet year partitions
// holding energy time series shaped like the U.S. Energy Information
// Administration's bulk data. The demo, the tests and the benchmarks of
// servingsnap all build snapshots from lakes made here, so the generator has to
// be realistic in the ways that matter to the builder (denormalised rows,
// series that start late, nulls, shuffled rows, several row groups per file)
// and exactly reproducible: the same Options give byte-identical files.
//
// # Why a separate Parquet implementation
//
// lakegen writes Parquet with parquet-go (github.com/parquet-go/parquet-go,
// GenericWriter over tagged row structs, zstd pages, an explicit Flush per row
// group), while the snapshot builder reads with arrow-go's pqarrow. Every test
// that generates a lake and builds a snapshot from it therefore crosses two
// independent Parquet implementations, which catches encoding assumptions that
// a single-library round trip would hide.
//
// # Layout and columns
//
// Generate writes hive-style partitions, one directory per year:
//
//	OUT/year=2000/part-0.parquet
//	OUT/year=2001/part-0.parquet   (part-0, part-1, ... with Options.FilesPerYear > 1)
//
// with one row per observation:
//
//	series_id  string            e.g. PET.EMM_EPMR_PTE_K3Z91Q_DPG.W (DATASET.CODE.F)
//	period     string            EIA API style: daily/weekly "YYYY-MM-DD",
//	                             monthly "YYYY-MM", quarterly "YYYY-Qn", annual "YYYY"
//	                             (DATE, the period's first day, with PeriodAsDate)
//	value      optional double   log random walk, about 0.5% nulls
//	units      string            $/gal, $/bbl, $/MMBtu, thousand MWh, short tons, ...
//	frequency  string            daily, weekly, monthly, quarterly, annual
//	name       string            e.g. "Weekly U.S. Regular Gasoline Retail Price"
//	category   string            e.g. Petroleum/Prices/Retail
//
// units, frequency, name and category are constant within a series. Daily
// series have one row per weekday, weekly series one per Monday (the week's
// first day; a week belongs to the year of its Monday). A file holds a
// contiguous range of series (split so the year's files have about the same
// row count); row groups hold whole series, about Options.RowGroupRows rows
// each, and rows are shuffled inside each row group with a seeded shuffle.
// Files with no rows are not written, so a partition can have fewer files than
// FilesPerYear only when fewer series are active in that year than it asks for.
//
// # Series mix and size
//
// A series draws its frequency from a fixed mix modelled on EIA's bulk files,
// where annual (SEDS, INTL) and monthly series dominate and daily ones are rare:
//
//	daily 0.5%   weekly 2%   monthly 38%   quarterly 15%   annual 44.5%
//
// Half the series start in FromYear; the others start on the first period of
// a year drawn uniformly from FromYear+1..ToYear, and all run to the end of
// ToYear. With the default range 2000–2024 a series has 149.1 rows on average
// (the package tests check it), so Series: 100000 gives about 15 million rows: the
// benchmark profile. Full-range counts are 6,522 (daily), 1,305 (weekly), 300,
// 100 and 25 rows.
//
// The dataset prefix (PET, NG, ELEC, COAL, TOTAL, INTL, SEDS, STEO) is drawn
// according to the frequency (SEDS is annual only, quarterly series come from
// ELEC, COAL and STEO, ...), then a measure of that dataset which fixes the
// name template, units, category and level. Ids embed a six-character token
// that is a seeded bijection of the series number, so they are unique across
// the lake without any bookkeeping.
//
// # Scale and determinism
//
// Nothing depends on generation order. A series' attributes come from a PRNG
// seeded by (seed, series number); its values in a year from one seeded by
// (seed, series, year). The log value at the start of each year follows a
// random walk with yearly steps of variance n·σ² (n periods in the year), and
// the periods inside the year follow a Brownian bridge between two
// consecutive year-start values. The result is exactly a Gaussian random walk
// in log space, continuous across partitions, yet every (series, year) can be
// computed on its own: files are generated concurrently (one worker per CPU by
// default), only one row group per worker is held in memory, and apart from
// three bytes per series kept for planning, memory does not grow with the lake.
//
// GenerateEIA turns the ten real EIA price series kept as CSV in
// data/eia-prices into a small lake with the same columns and layout.
package lakegen
