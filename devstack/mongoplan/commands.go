package mongoplan

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// Commands are the queries of a started command, one per statement of an update or a
// delete; nil for commands that query nothing (inserts, getMores, handshakes, index
// builds) and for an aggregate that reads no collection.
func Commands(e *event.CommandStartedEvent) []Command {
	cmd := e.Command
	coll, ok := cmd.Lookup(e.CommandName).StringValueOK()
	if !ok {
		return nil
	}
	base := Command{Name: e.CommandName, Database: e.DatabaseName, Collection: coll, Filter: emptyDoc}
	doc := func(d bson.Raw, key string) bson.Raw {
		if v, err := d.LookupErr(key); err == nil {
			if r, ok := v.DocumentOK(); ok {
				return r
			}
		}
		return nil
	}
	withHint := func(c Command, d bson.Raw) Command {
		if v, err := d.LookupErr("hint"); err == nil {
			if s, ok := v.StringValueOK(); ok {
				c.HintName = s
			} else if r, ok := v.DocumentOK(); ok {
				c.Hint = r
			}
		}
		return c
	}
	filter := func(d bson.Raw, key string) bson.Raw {
		if f := doc(d, key); f != nil {
			return f
		}
		return emptyDoc
	}
	switch e.CommandName {
	case "find":
		c := withHint(base, cmd)
		c.Filter, c.Sort, c.Projection = filter(cmd, "filter"), doc(cmd, "sort"), doc(cmd, "projection")
		c.Limit = limit(cmd.Lookup("limit"))
		return []Command{c}
	case "findAndModify":
		c := withHint(base, cmd)
		c.Filter, c.Sort, c.Projection = filter(cmd, "query"), doc(cmd, "sort"), doc(cmd, "fields")
		c.Limit = 1
		return []Command{c}
	case "count":
		c := withHint(base, cmd)
		c.Filter = filter(cmd, "query")
		return []Command{c}
	case "distinct":
		c := withHint(base, cmd)
		c.Filter = filter(cmd, "query")
		c.Key, _ = cmd.Lookup("key").StringValueOK()
		return []Command{c}
	case "update", "delete":
		field, q := "updates", "q"
		if e.CommandName == "delete" {
			field = "deletes"
		}
		var out []Command
		for _, st := range arrayDocs(cmd.Lookup(field)) {
			c := withHint(base, st)
			c.Filter, c.Sort = filter(st, q), doc(st, "sort")
			out = append(out, c)
		}
		return out
	case "aggregate":
		stages := arrayDocs(cmd.Lookup("pipeline"))
		c := withHint(base, cmd)
		if len(stages) == 0 {
			return []Command{c}
		}
		first, _ := stages[0].Elements()
		if len(first) == 0 {
			return []Command{c}
		}
		switch first[0].Key() {
		case "$collStats", "$indexStats", "$listSearchIndexes", "$planCacheStats":
			return nil
		case "$match":
			c.Filter = doc(stages[0], "$match")
			if c.Filter == nil {
				c.Filter = emptyDoc
			}
			stages = stages[1:]
		}
		if len(stages) > 0 {
			if c.Sort = doc(stages[0], "$sort"); c.Sort != nil {
				stages = stages[1:]
			}
		}
		if len(stages) > 0 {
			c.Limit = limit(stages[0].Lookup("$limit"))
		}
		return []Command{c}
	}
	return nil
}

// limit reads a limit's value (a negative one, a single batch, counts as its size).
func limit(v bson.RawValue) int64 {
	n, ok := v.AsInt64OK()
	if !ok {
		return 0
	}
	return max(n, -n)
}

var emptyDoc = func() bson.Raw { b, _ := bson.Marshal(bson.D{}); return b }()

// IndexesOf lists the indexes of every collection of db, by collection.
func IndexesOf(ctx context.Context, db *mongo.Database) (map[string][]Index, error) {
	names, err := db.ListCollectionNames(ctx, bson.D{})
	if err != nil {
		return nil, fmt.Errorf("list collections of %s: %w", db.Name(), err)
	}
	out := map[string][]Index{}
	for _, name := range names {
		cur, err := db.Collection(name).Indexes().List(ctx)
		if err != nil {
			return nil, fmt.Errorf("list indexes of %s.%s: %w", db.Name(), name, err)
		}
		var specs []struct {
			Name   string   `bson:"name"`
			Key    bson.Raw `bson:"key"`
			Unique bool     `bson:"unique"`
		}
		if err := cur.All(ctx, &specs); err != nil {
			return nil, fmt.Errorf("list indexes of %s.%s: %w", db.Name(), name, err)
		}
		for _, s := range specs {
			ix := Index{Name: s.Name, Keys: Keys(s.Key), Unique: s.Unique || s.Name == idIndex.Name}
			if len(ix.Keys) > 0 {
				out[name] = append(out[name], ix)
			}
		}
	}
	return out, nil
}
