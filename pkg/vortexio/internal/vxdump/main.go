// Command vxdump prints vortexio.Describe for each file argument; it is a
// development aid until the lead wires Describe into snapinspect.
package main

import (
	"fmt"
	"os"

	"github.com/energyscope/servingsnap/pkg/vortexio"
)

func main() {
	for _, p := range os.Args[1:] {
		f, err := vortexio.OpenFile(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("==", p)
		if err := vortexio.Describe(os.Stdout, f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		f.Close()
	}
}
