// Package sqlq parses the restricted SQL that Flight SQL clients send
// (docs/FLIGHT.md "Flight SQL") into the read layer's query.Request: a
// small recursive-descent parser of one SELECT form (rows, or one row of
// aggregates), with ? parameters bound later. Names keep how they were
// written (bare or quoted) for the server to resolve against what it
// serves. It knows nothing of gRPC; errors wrap query.ErrInvalid and say
// what is supported.
package sqlq
