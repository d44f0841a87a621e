/* cli.c - the seedpipe command-line tool (placeholder during bring-up). */
#include <stdio.h>
#include "seedpipe/common.h"
int main(void) { puts(sp_version_string()); return 0; }
