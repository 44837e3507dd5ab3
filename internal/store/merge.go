package store

// Merge adds x to the first of rows that is x's row (same says so), or
// appends x when none is: how a settlement's usage and prompt-cache rows
// (Usage.Add, CacheUsage.Add) are summed by what they are kept by.
func Merge[T any, P interface {
	*T
	Add(T)
}](rows []T, x T, same func(P) bool) []T {
	for i := range rows {
		if same(&rows[i]) {
			P(&rows[i]).Add(x)
			return rows
		}
	}
	return append(rows, x)
}
