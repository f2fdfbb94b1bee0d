package period

import "fmt"

// ParseBytes is Parse of bytes, without allocation on the happy path
// (TestParseBytesDoesNotAllocate holds parse to that).
func ParseBytes(b []byte) (int32, error) {
	d, err := parse(b)
	if err != nil {
		// string(b) copies, so b does not escape and callers may pass stack buffers.
		return 0, fmt.Errorf("period %q: %w", string(b), err)
	}
	return d, nil
}
