// Command fakes3 serves an in-memory S3-compatible store on loopback for
// the interop tests (github.com/johannesboyne/gofakes3): it creates the
// buckets named on the command line, prints its URL on one line, and
// serves until stdin closes or it is killed.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "loopback address to listen on")
	flag.Parse()
	be := s3mem.New()
	for _, b := range flag.Args() {
		if err := be.CreateBucket(b); err != nil {
			log.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		log.Fatalf("fakes3 serves loopback only, not %s", ip)
	}
	fmt.Printf("http://%s\n", ln.Addr())
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	log.Fatal(http.Serve(ln, gofakes3.New(be, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()))
}
