/* A C program built against the installed library the way users build theirs:
 * cc consumer.c $(pkg-config --cflags --libs stable-diffusion), or find_package. */
#include <stable-diffusion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void on_log(enum sd_log_level_t level, const char* text, void* data) {
  if (level == SD_LOG_ERROR) ++*(int*)data;
  fputs(text, stderr);
}

int main(void) {
  int errors = 0;
  sd_set_log_callback(on_log, &errors);
  sd_ctx_params_t params;
  sd_ctx_params_init(&params);
  params.model_path = "/no/such/model.safetensors";
  char* text = sd_ctx_params_to_str(&params);
  if (!text || !strstr(text, "model_path: /no/such/model.safetensors")) return 1;
  free(text);
  /* No model there: NULL, and the reason through the log callback. */
  if (new_sd_ctx(&params) != NULL || errors == 0) return 2;
  char devices[256];
  if (sd_list_devices(devices, sizeof devices) == 0) return 3;
  printf("stable-diffusion %s, devices:\n%s", sd_version(), devices);
  return 0;
}
