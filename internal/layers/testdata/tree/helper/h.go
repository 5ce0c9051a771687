package helper

import _ "example.com/m/applier/x"
