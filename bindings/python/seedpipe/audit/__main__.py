"""`python -m seedpipe.audit TARGET ...`: the CLI twin of seedpipe.audit()
(see the package's help). A package's __main__, so that running it needs no
warnings filter: `import seedpipe` imports seedpipe.audit, and runpy warns
only when the module it runs as __main__ was imported already."""
import sys

from . import main

sys.exit(main())
