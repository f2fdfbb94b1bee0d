package deltalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
)

// Action is one line of a commit or one row of a checkpoint: exactly one of
// its fields is set. Actions this reader does not need (txn, cdc,
// domainMetadata, ...) are ignored, as the protocol requires of unknown
// ones.
type Action struct {
	Add                *Add                `json:"add,omitempty"`
	Remove             *Remove             `json:"remove,omitempty"`
	MetaData           *MetaData           `json:"metaData,omitempty"`
	Protocol           *Protocol           `json:"protocol,omitempty"`
	CommitInfo         *CommitInfo         `json:"commitInfo,omitempty"`
	Sidecar            *Sidecar            `json:"sidecar,omitempty"`
	CheckpointMetadata *CheckpointMetadata `json:"checkpointMetadata,omitempty"`
}

// Add adds a logical file: a data file and its optional deletion vector.
type Add struct {
	Path             string             `json:"path"`
	PartitionValues  map[string]*string `json:"partitionValues"`
	Size             int64              `json:"size"`
	ModificationTime int64              `json:"modificationTime"`
	DataChange       bool               `json:"dataChange"`
	DeletionVector   *DeletionVector    `json:"deletionVector,omitempty"`
}

// Remove removes a logical file.
type Remove struct {
	Path              string          `json:"path"`
	DeletionTimestamp *int64          `json:"deletionTimestamp,omitempty"`
	DataChange        bool            `json:"dataChange"`
	DeletionVector    *DeletionVector `json:"deletionVector,omitempty"`
}

// MetaData is the table's metadata: schema, partition columns, properties.
type MetaData struct {
	ID               string            `json:"id"`
	Name             string            `json:"name,omitempty"`
	Format           Format            `json:"format"`
	SchemaString     string            `json:"schemaString"`
	PartitionColumns []string          `json:"partitionColumns"`
	CreatedTime      *int64            `json:"createdTime,omitempty"`
	Configuration    map[string]string `json:"configuration"`
}

// Format is the metaData's file format; only "parquet" is readable.
type Format struct {
	Provider string            `json:"provider"`
	Options  map[string]string `json:"options,omitempty"`
}

// Protocol names the reader and writer versions and features.
type Protocol struct {
	MinReaderVersion int      `json:"minReaderVersion"`
	MinWriterVersion int      `json:"minWriterVersion"`
	ReaderFeatures   []string `json:"readerFeatures,omitempty"`
	WriterFeatures   []string `json:"writerFeatures,omitempty"`
}

// CommitInfo is the provenance of a commit; only its in-commit timestamp
// matters here.
type CommitInfo struct {
	Timestamp         *int64 `json:"timestamp,omitempty"`
	InCommitTimestamp *int64 `json:"inCommitTimestamp,omitempty"`
}

// Sidecar names a V2 checkpoint's sidecar file of add and remove actions.
type Sidecar struct {
	Path        string `json:"path"`
	SizeInBytes int64  `json:"sizeInBytes"`
}

// CheckpointMetadata marks a V2-spec checkpoint.
type CheckpointMetadata struct {
	Version int64 `json:"version"`
}

// DeletionVector is a DeletionVectorDescriptor (PROTOCOL.md, "Deletion
// Vectors").
type DeletionVector struct {
	StorageType    string `json:"storageType"`
	PathOrInlineDv string `json:"pathOrInlineDv"`
	Offset         *int32 `json:"offset,omitempty"`
	SizeInBytes    int32  `json:"sizeInBytes"`
	Cardinality    int64  `json:"cardinality"`
}

// UniqueID identifies the DV among the DVs of one data file.
func (dv *DeletionVector) UniqueID() string {
	if dv == nil {
		return ""
	}
	id := dv.StorageType + dv.PathOrInlineDv
	if dv.Offset != nil {
		id += "@" + strconv.Itoa(int(*dv.Offset))
	}
	return id
}

// maxActionLine bounds one action line; a commit line this long is not a
// commit.
const maxActionLine = 64 << 20

// ParseActions decodes newline-delimited JSON actions (a commit file, or a
// JSON checkpoint). Blank lines are skipped; a line that is not a JSON
// object, or an action whose fields break the protocol, is an error naming
// the line. It never panics.
func ParseActions(b []byte) ([]Action, error) {
	var out []Action
	line := 0
	for len(b) > 0 {
		line++
		var l []byte
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			l, b = b[:i], b[i+1:]
		} else {
			l, b = b, nil
		}
		l = bytes.TrimSpace(l)
		if len(l) == 0 {
			continue
		}
		if len(l) > maxActionLine {
			return nil, fmt.Errorf("line %d: %d bytes, over the limit of %d", line, len(l), maxActionLine)
		}
		a, err := parseAction(l)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		out = append(out, a)
	}
	return out, nil
}

func parseAction(l []byte) (Action, error) {
	var a Action
	if l[0] != '{' {
		return a, fmt.Errorf("not a JSON object")
	}
	if err := json.Unmarshal(l, &a); err != nil {
		return a, fmt.Errorf("not a valid action: %w", err)
	}
	return a, a.validate()
}

// validate checks what the reader relies on: paths present and decodable,
// sizes not negative, deletion vectors well-formed.
func (a *Action) validate() error {
	n := 0
	for _, set := range []bool{a.Add != nil, a.Remove != nil, a.MetaData != nil, a.Protocol != nil, a.CommitInfo != nil, a.Sidecar != nil, a.CheckpointMetadata != nil} {
		if set {
			n++
		}
	}
	if n > 1 {
		return fmt.Errorf("one line holds %d actions", n)
	}
	switch {
	case a.Add != nil:
		if err := checkPath(a.Add.Path); err != nil {
			return fmt.Errorf("add: %w", err)
		}
		if a.Add.Size < 0 {
			return fmt.Errorf("add %s: negative size %d", a.Add.Path, a.Add.Size)
		}
		if err := a.Add.DeletionVector.validate(); err != nil {
			return fmt.Errorf("add %s: deletion vector: %w", a.Add.Path, err)
		}
	case a.Remove != nil:
		if err := checkPath(a.Remove.Path); err != nil {
			return fmt.Errorf("remove: %w", err)
		}
		if err := a.Remove.DeletionVector.validate(); err != nil {
			return fmt.Errorf("remove %s: deletion vector: %w", a.Remove.Path, err)
		}
	case a.MetaData != nil:
		if a.MetaData.SchemaString == "" {
			return fmt.Errorf("metaData without schemaString")
		}
	case a.Protocol != nil:
		if a.Protocol.MinReaderVersion < 1 {
			return fmt.Errorf("protocol: minReaderVersion %d", a.Protocol.MinReaderVersion)
		}
	case a.Sidecar != nil:
		if err := checkPath(a.Sidecar.Path); err != nil {
			return fmt.Errorf("sidecar: %w", err)
		}
	}
	return nil
}

func checkPath(p string) error {
	if p == "" {
		return fmt.Errorf("empty path")
	}
	if _, err := url.PathUnescape(p); err != nil {
		return fmt.Errorf("path %q is not a valid URI: %w", p, err)
	}
	return nil
}

func (dv *DeletionVector) validate() error {
	if dv == nil {
		return nil
	}
	switch dv.StorageType {
	case "i":
		if dv.Offset != nil {
			return fmt.Errorf("inline deletion vector with an offset")
		}
	case "u":
		if len(dv.PathOrInlineDv) < 20 {
			return fmt.Errorf("storage type u: %q is shorter than a Z85 UUID", dv.PathOrInlineDv)
		}
	case "p":
		if dv.PathOrInlineDv == "" {
			return fmt.Errorf("storage type p: empty path")
		}
	default:
		return fmt.Errorf("unknown storage type %q", dv.StorageType)
	}
	if dv.SizeInBytes < 0 || dv.Cardinality < 0 || dv.Offset != nil && *dv.Offset < 0 {
		return fmt.Errorf("negative size, cardinality or offset")
	}
	return nil
}
