package convert

import "sort"

// reservedMember holds the names Cube reserves for member properties: a dimension or
// measure named so does not compile (sql, sql_table, extends) or compiles into something
// else. Generated from Cube's own schema (devstack/cubecompiler/reserved.js over
// @cubejs-backend/schema-compiler 1.7.43's CubeValidator); TestReservedNamesMatchCube
// fails when the installed compiler's list differs.
var reservedMember = map[string]bool{
	"addGroupBy": true, "add_group_by": true, "aliases": true, "case": true, "cumulative": true,
	"currency": true, "description": true, "drillFilters": true, "drillMemberReferences": true,
	"drillMembers": true, "drill_filters": true, "drill_member_references": true,
	"drill_members": true, "enableSuggestions": true, "enable_suggestions": true, "extends": true,
	"fieldType": true, "field_type": true, "filter": true, "filters": true, "format": true,
	"grain": true, "granularities": true, "groupBy": true, "group_by": true, "key": true,
	"keyReference": true, "key_reference": true, "latitude": true, "links": true, "longitude": true,
	"mask": true, "meta": true, "multiStage": true, "multi_stage": true, "order": true,
	"orderBy": true, "order_by": true, "primaryKey": true, "primary_key": true,
	"propagateFiltersToSubQuery": true, "propagate_filters_to_sub_query": true, "public": true,
	"reduceBy": true, "reduce_by": true, "rollingWindow": true, "rolling_window": true, "shown": true,
	"sql": true, "sqlTable": true, "sql_table": true, "subQuery": true, "sub_query": true,
	"suggestFilterValues": true, "suggest_filter_values": true, "timeShift": true, "time_shift": true,
	"title": true, "type": true, "values": true, "valuesAsSegments": true, "values_as_segments": true,
	"visible": true,
}

// ReservedMemberNames lists reservedMember, sorted.
func ReservedMemberNames() []string {
	out := make([]string, 0, len(reservedMember))
	for n := range reservedMember {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
