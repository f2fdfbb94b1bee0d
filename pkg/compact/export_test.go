package compact

// SetDictChunk sets how many series' ids and attributes a compaction holds
// at once, and returns the function that restores it.
func SetDictChunk(n int) (restore func()) {
	old := dictChunkSeries
	dictChunkSeries = n
	return func() { dictChunkSeries = old }
}
