package spend

// StreamOnce is streamOnce, for the external benchmarks.
var StreamOnce = streamOnce

// ReportMedians is reportMedians, for the external benchmarks.
var ReportMedians = reportMedians
