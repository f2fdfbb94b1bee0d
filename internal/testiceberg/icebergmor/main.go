// Command icebergmor writes the merge-on-read Iceberg fixtures of package
// testiceberg under a warehouse directory and prints them as JSON (table
// locations, delete kinds, and the rows each snapshot must read as), for
// the interop suite: go run ./internal/testiceberg/icebergmor WAREHOUSE
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/energyscope/servingsnap/internal/testiceberg"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: icebergmor WAREHOUSE")
		os.Exit(2)
	}
	tables, err := testiceberg.Write(context.Background(), os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "icebergmor:", err)
		os.Exit(1)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(tables); err != nil {
		fmt.Fprintln(os.Stderr, "icebergmor:", err)
		os.Exit(1)
	}
}
