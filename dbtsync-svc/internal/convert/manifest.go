package convert

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// DecodeManifest reads a manifest.json as a stream, one node at a time, keeping only what
// the data model needs: memory stays proportional to the models, not to the file (raw and
// compiled SQL, macros, docs and the rest are skipped without being held).
func DecodeManifest(r io.Reader) (*Project, error) { return DecodeManifestNotify(r, nil) }

// DecodeManifestNotify is DecodeManifest calling onModel (when not nil) with each model as
// soon as it is decoded, so a caller can prepare for its file while the rest streams in.
func DecodeManifestNotify(r io.Reader, onModel func(*Model)) (*Project, error) {
	dec := jsontext.NewDecoder(r, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	p := &Project{}
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, notJSON(err)
	}
	if tok.Kind() != '{' {
		return nil, ErrNotManifest
	}
	sawNodes := false
	for dec.PeekKind() != '}' {
		key, err := readKey(dec)
		if err != nil {
			return nil, notJSON(err)
		}
		sawNodes = sawNodes || key == "nodes"
		if err := decodeSection(dec, key, p, onModel); err != nil {
			return nil, err
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, notJSON(err)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data after the manifest object", ErrNotJSON)
	}
	if !sawNodes {
		return nil, ErrNoNodes
	}
	return p, nil
}

// decodeSection reads the value of the manifest's top-level member key into p; the
// members the data model does not use are skipped unread.
func decodeSection(dec *jsontext.Decoder, key string, p *Project, onModel func(*Model)) error {
	switch key {
	case "metadata":
		var md struct {
			Version string `json:"dbt_schema_version"`
			Adapter string `json:"adapter_type"`
		}
		if err := readInto(dec, &md); err != nil {
			return err
		}
		p.Adapter = md.Adapter
		if md.Version != "" {
			v, err := CheckSchemaVersion(md.Version)
			if err != nil {
				return err
			}
			p.SchemaVersion = v
		}
		return nil
	case "nodes":
		if dec.PeekKind() != '{' {
			return fmt.Errorf("%w: nodes is not an object", ErrNoNodes)
		}
		return eachMember(dec, func(id string) error { return decodeNode(dec, id, p, onModel) })
	case "semantic_models":
		return eachMemberOrNull(dec, func(string) error {
			var sm rawSemanticModel
			if err := readInto(dec, &sm); err != nil {
				return err
			}
			p.SemanticModels = append(p.SemanticModels, sm.toSemanticModel())
			return nil
		})
	case "metrics":
		return eachMemberOrNull(dec, func(string) error {
			var m rawMetric
			if err := readInto(dec, &m); err != nil {
				return err
			}
			switch {
			case m.Type != "":
				p.Metrics = append(p.Metrics, m.toMetric())
			case m.CalculationMethod != "": // dbt 1.3 to 1.5, before MetricFlow
				p.LegacyMetrics = append(p.LegacyMetrics, m.toLegacyMetric())
			}
			return nil
		})
	case "saved_queries":
		return eachMemberOrNull(dec, func(string) error {
			var q rawSavedQuery
			if err := readInto(dec, &q); err != nil {
				return err
			}
			p.SavedQueries = append(p.SavedQueries, q.toSavedQuery())
			return nil
		})
	}
	return notJSON(dec.SkipValue())
}

// notJSON marks a decoding error as ErrNotJSON (nil stays nil).
func notJSON(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrNotJSON) || errors.Is(err, ErrNoNodes) || errors.Is(err, ErrNotManifest) {
		return err
	}
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("%w: %v", ErrNotJSON, err)
}

// readKey reads an object member's name. Names of the dbt schema come from a fixed table
// rather than a fresh string each: a manifest has millions of them.
func readKey(dec *jsontext.Decoder) (string, error) {
	if dec.PeekKind() != '"' {
		if _, err := dec.ReadToken(); err != nil {
			return "", err
		}
		return "", fmt.Errorf("expected an object key")
	}
	raw, err := dec.ReadValue()
	if err != nil {
		return "", err
	}
	name := []byte(raw[1 : len(raw)-1])
	if bytes.IndexByte(name, '\\') >= 0 {
		if name, err = jsontext.AppendUnquote(nil, raw); err != nil {
			return "", err
		}
	}
	if known, ok := schemaNames[string(name)]; ok {
		return known, nil
	}
	return string(name), nil
}

var schemaNames = func() map[string]string {
	m := map[string]string{}
	for _, n := range strings.Fields(`metadata nodes sources macros docs exposures metrics groups selectors disabled
		parent_map child_map group_map saved_queries semantic_models unit_tests functions dbt_schema_version
		database schema name resource_type package_name path original_file_path unique_id fqn alias checksum
		config tags description columns meta group docs patch_path build_path unrendered_config created_at
		relation_name raw_code compiled_code language refs sources depends_on compiled_path compiled
		extra_ctes_injected extra_ctes contract access constraints version latest_version deprecation_date
		primary_key time_spine doc_blocks config_call_dict deferred data_type quote granularity column_name
		attached_node test_metadata file_key_name namespace kwargs enabled materialized model to field
		show node_color nodes macros persist_docs post-hook pre-hook quoting column_types full_refresh unique_key
		on_schema_change on_configuration_change grants packages incremental_strategy event_time batch_size
		lookback begin concurrent_batches severity store_failures store_failures_as warn_if error_if fail_calc
		where limit identifier enforced alias_types`) {
		m[n] = n
	}
	return m
}()

func readInto(dec *jsontext.Decoder, dst any) error {
	val, err := dec.ReadValue()
	if err != nil {
		return notJSON(err)
	}
	if err := json.Unmarshal(val, dst); err != nil {
		// A member of an unexpected shape is not a broken manifest: keep what decoded.
		return nil
	}
	return nil
}

// eachMember calls fn for every member of the object at the decoder's position; fn must
// consume the member's value.
func eachMember(dec *jsontext.Decoder, fn func(key string) error) error {
	tok, err := dec.ReadToken()
	if err != nil {
		return notJSON(err)
	}
	if tok.Kind() != '{' {
		return fmt.Errorf("%w: expected an object", ErrNotJSON)
	}
	for dec.PeekKind() != '}' {
		key, err := readKey(dec)
		if err != nil {
			return notJSON(err)
		}
		if err := fn(key); err != nil {
			return err
		}
	}
	_, err = dec.ReadToken()
	return notJSON(err)
}

func eachMemberOrNull(dec *jsontext.Decoder, fn func(key string) error) error {
	if dec.PeekKind() != '{' {
		return notJSON(dec.SkipValue())
	}
	return eachMember(dec, fn)
}

func kindName(k jsontext.Kind) string {
	switch k {
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case '0':
		return "number"
	}
	return "value"
}

// readMeta decodes a meta object; the common empty one costs no allocation.
func readMeta(dec *jsontext.Decoder, dst *map[string]any) error {
	if dec.PeekKind() == '{' {
		val, err := dec.ReadValue()
		if err != nil {
			return notJSON(err)
		}
		if len(bytes.TrimSpace(val[1:len(val)-1])) == 0 {
			return nil
		}
		if err := json.Unmarshal(val, dst); err != nil {
			*dst = nil // a meta of an unexpected shape is ignored, as a missing one
		}
		return nil
	}
	return notJSON(dec.SkipValue())
}

// readLenient decodes a value into dst, ignoring a value of another shape (as a missing one).
func readLenient(dec *jsontext.Decoder, dst any) error {
	val, err := dec.ReadValue()
	if err != nil {
		return notJSON(err)
	}
	_ = json.Unmarshal(val, dst)
	return nil
}

func readString(dec *jsontext.Decoder, dst *string) error {
	tok, err := dec.ReadToken()
	if err != nil {
		return notJSON(err)
	}
	switch tok.Kind() {
	case '"':
		*dst = tok.String()
	case '{', '[':
		// Not a string: skip the rest of the composite value.
		depth := 1
		for depth > 0 {
			t, err := dec.ReadToken()
			if err != nil {
				return notJSON(err)
			}
			switch t.Kind() {
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
		}
	}
	return nil
}
