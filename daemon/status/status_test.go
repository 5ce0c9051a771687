package status

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReadRecord: without a daemon, a state dir that does not exist is
// said so and not created, and one without a record has none.
func TestReadRecord(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mkdir bool
		want  *Record
	}{
		{name: "no dir", mkdir: false, want: &Record{NoDir: true}},
		{name: "empty dir", mkdir: true, want: &Record{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			if tc.mkdir {
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			got, err := ReadRecord(dir)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ReadRecord (-want +got):\n%s", diff)
			}
			if _, err := os.Stat(dir); tc.mkdir == os.IsNotExist(err) {
				t.Errorf("the state dir exists: %v, want %v", !os.IsNotExist(err), tc.mkdir)
			}
		})
	}
}
