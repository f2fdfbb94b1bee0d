package convert

import "context"

// Convert streams in to out. out is written under a temporary name and
// renamed into place only when complete; an existing out is refused unless
// overwrite is set.
func Convert(ctx context.Context, in, out string, overwrite bool) (*Stats, error) {
	return ConvertWith(ctx, in, out, overwrite, nil)
}
