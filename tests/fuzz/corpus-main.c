/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * corpus-main.c - run a fuzz target without libFuzzer: every file in the
 * directories (or files) named on the command line goes once through
 * LLVMFuzzerTestOneInput.  This is how the seed corpus runs as a plain
 * test with any compiler.  Prints a TAP plan and one line per input.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int nr;

static void run_file(const char *path)
{
	FILE *fp = fopen(path, "rb");
	uint8_t *buf;
	long len;

	if (!fp) {
		printf("not ok %d - %s: cannot open\n", ++nr, path);
		exit(1);
	}
	fseek(fp, 0, SEEK_END);
	len = ftell(fp);
	fseek(fp, 0, SEEK_SET);
	buf = malloc(len > 0 ? (size_t)len : 1);
	if (!buf || fread(buf, 1, (size_t)len, fp) != (size_t)len)
		abort();
	fclose(fp);
	LLVMFuzzerTestOneInput(buf, (size_t)len);
	free(buf);
	printf("ok %d - %s\n", ++nr, path);
}

static void run_path(const char *path)
{
	struct dirent **ents;
	struct stat st;
	char sub[4096];
	int n;

	if (stat(path, &st) || !S_ISDIR(st.st_mode)) {
		run_file(path);
		return;
	}
	n = scandir(path, &ents, NULL, alphasort);
	for (int i = 0; i < n; i++) {
		if (ents[i]->d_name[0] != '.') {
			snprintf(sub, sizeof(sub), "%s/%s", path,
				 ents[i]->d_name);
			run_path(sub);
		}
		free(ents[i]);
	}
	if (n >= 0)
		free(ents);
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		run_path(argv[i]);
	printf("1..%d\n", nr);
	return 0;
}
