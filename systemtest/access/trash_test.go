package access_test

import "testing"

// trashedWorkbook is a workbook of the scope's folder that its admin deleted: in the trash.
func (p *platform) trashedWorkbook(t *testing.T, sc *scope) int64 {
	wb := p.freshWorkbook(t, sc)
	p.must(t, "DELETE", sc.path("/workbooks/%d", wb), "Bearer "+sc.admin, nil, 204)
	return wb
}
