package render

import _ "example.com/m/applier/x" // a test may import anything
