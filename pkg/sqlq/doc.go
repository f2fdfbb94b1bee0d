// Package sqlq parses the restricted SQL that Flight SQL clients send
// (docs/FLIGHT.md "Flight SQL") into the read layer's query.Request: a
// small recursive-descent parser of one SELECT form, with ? parameters
// bound later. It knows nothing of gRPC; errors wrap query.ErrInvalid and
// say what is supported.
package sqlq
