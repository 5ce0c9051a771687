package daemon

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestEmptyFileKeepsLastGood: a spec file emptied (an editor's
// truncation, a generator that failed) holds no object, which is an
// error: the tree is invalid and the Service the file held stays, as the
// last good state, instead of going with an INFO line.
func TestEmptyFileKeepsLastGood(t *testing.T) {
	tree := basicTree(t)
	r, log := startLogged(t, tree, -1)
	log.waitRec(t, 0, "synced", "reason", "start", "kind", "full")
	r.fileHas(t, "env/shop.env", "WEB_SERVICE_HOST=")
	atomicWrite(t, filepath.Join(tree, "web/service.yaml"), "# emptied\n")
	rec := log.waitRec(t, 0, "tree invalid, keeping last good state")
	if rec.attrs["errors"] != "1" {
		t.Errorf("tree invalid record: %v, want 1 error", rec)
	}
	r.idle(t)
	if env := r.file(t, "env/shop.env"); !strings.Contains(env, "WEB_SERVICE_HOST=") {
		t.Errorf("the emptied file's Service went from the state dir:\n%s", env)
	}
}
